"""The step record's contract, on the ground floor where every reader sees it.

- ``contract``: the names every part shares (outcomes, reasons, failed checks, the per-step fields by table);
- ``records``: the step record and its ledger rows (plain dataclasses, JSON round trip);
- ``json_values``: any value made JSON-native.

Nothing here imports another room of the project but ``judging`` (``tests/test_import_structure.py``).
"""
