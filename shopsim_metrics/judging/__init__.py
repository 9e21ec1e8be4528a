"""Judging one finished group: technical, zero-std or spread, and the group's tokens."""
