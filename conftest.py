"""Doctests (the docstring examples of ``shopsim_metrics`` and ``shopsimrl``) run in a temporary directory.

The working directory, ``tempfile``'s directory and the run directory are all under pytest's own
temporary path, so an example never writes into the checkout nor leaves files behind; W&B is off.
"""

from __future__ import annotations

import tempfile

import pytest


@pytest.fixture(autouse=True)
def _doctests_run_in_a_temporary_directory(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> None:
    if type(request.node).__name__ != "DoctestItem":
        return
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("SHOPSIM_RUN_DIR", str(tmp_path / "shopsim_run"))
    monkeypatch.setenv("WANDB_MODE", "disabled")
