"""``tune --prompt-skip`` says one thing: one verdict line, which agrees with every figure printed before it.

Its comparison runs an assumed pool (zero-std follows the prompt); the run's measured persistence decides whether the
run is such a pool (the advisory's rule). The headline ratio is the pool's, said to be; the verdict is the only line
that says whether to turn skipping on, and it never says "pays" where the run's persistence or the pool says no.
"""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.health.advisories import skipping_pays
from shopsim_metrics.simulator.skipping.skip_saving import VERDICT, skipping_decision, skipping_verdict

shares = st.floats(0.0, 1.0)
persistences = st.one_of(st.none(), st.floats(0.0, 1.0))
ratios = st.one_of(st.none(), st.floats(0.3, 3.0))


@given(persistence=persistences, share=st.one_of(st.none(), shares), ratio=ratios)
def test_the_verdict_is_one_answer_agreeing_with_the_rule_and_the_pool(persistence, share, ratio):
    decision = skipping_decision(persistence, share, ratio)
    text = skipping_verdict(persistence, share, ratio)
    assert text.startswith(VERDICT) and "\n" not in text
    if share is None:
        assert decision is None and text.startswith(VERDICT + "unknown")
        return
    expected = skipping_pays(persistence, share) and (ratio is None or round(ratio, 2) > 1.0)
    assert decision is expected
    said_pays = text.startswith(VERDICT + "skipping pays")
    said_not = text.startswith(VERDICT + "skipping does not pay")
    assert said_pays != said_not and said_pays is expected
    if not expected and ratio is not None and round(ratio, 2) > 1.0:  # the pool's saving, said as conditional
        assert "holds only where" in text or "even on a pool" in text or "every group is zero-std" in text \
            or "no prompt was revisited" in text


def test_tune_from_a_run_where_zero_std_is_luck_never_says_skipping_saves(tmp_path, capsys, monkeypatch):
    """A run whose zero-std is the luck of the draw (the demo's records): the pool's ratio is a conditional, the one
    verdict says over-sampling pays, and the JSON says the same."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run = tmp_path / "d" / "run"
    assert main(["demo", "--out", str(tmp_path / "d"), "--steps", "12", "--no-progress"]) == 0
    capsys.readouterr()
    tune = ["tune", "--from", str(run), "--steps", "30", "--jobs", "1", "--candidates", "16,32", "--no-widen",
            "--prompt-skip", "predictive"]
    assert main(tune) == 0
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith(VERDICT)]
    assert len(verdicts) == 1
    headline = next(line for line in out.splitlines() if line.startswith("prompt skipping (predictive)"))
    assert headline.endswith("on that pool (whether your run is such a pool: the verdict below)")
    assert main([*tune, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["prompt_skip"]
    assert report["verdict"] == verdicts[0]
    pays = verdicts[0].startswith(VERDICT + "skipping pays")
    assert report["skipping_pays"] is pays
    assert pays is skipping_pays(report["run_zero_std_persistence"], report["run_zero_std_share"]) and (
        report["token_ratio"] is None or round(report["token_ratio"], 2) > 1.0 or not pays)
