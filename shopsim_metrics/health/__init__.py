"""What goes wrong, and what to change: ``streak`` (consecutive technical groups), ``alerts`` (its WARN and ERROR), ``advisories`` (what the recent steps say to change).
"""
