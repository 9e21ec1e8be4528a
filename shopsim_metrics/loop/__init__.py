"""What the rollout loop says: ``loop_state`` (slime's live step and ``remaining``, read at each judgement) and ``step_number`` (the one owner of a step's number).
"""
