"""slime's fully-async path: ``fully_async_batch`` (which finished group may enter the batch) and ``fully_async_step`` (one fully-async step).
"""
