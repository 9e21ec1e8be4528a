"""What ``replay`` can judge, and says so: the wave size of a framework's dump is the dump's own (printed with where it
comes from, or said unknown), a kept-only dump gets its bias and no best row, and the best row's lost-signal limit has
a name no one reads as the guard's setting (the former ``--max-lost-signal`` warns)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.outcomes.groups import KEPT_ONLY, WHOLE_RUN, DumpOptions, wave_size_of
from shopsim_metrics.outcomes.slime import drawn_per_step
from shopsim_metrics.outcomes.sources import load_outcomes

PROMPTS = tuple(f"question {i}" for i in range(24))


def verl_run(folder: Path, *, steps: int = 4, groups: int = 12, n: int = 4) -> Path:
    """verl's ``{step}.jsonl`` files: ``groups`` prompts of ``n`` rows per step (half spread, half all-fail)."""
    folder.mkdir(parents=True, exist_ok=True)
    for step in range(1, steps + 1):
        rows = [{"input": PROMPTS[(step + g) % len(PROMPTS)], "output": "o", "step": step,
                 "score": float(i % 2) if g % 2 else 0.0} for g in range(groups) for i in range(n)]
        (folder / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _replay(path: Path, *extra: str) -> list[str]:
    return ["replay", str(path), "--seeds", "1", "--no-progress", "--prompt-skip", "off", "greso",
            "--wave-size", "fixed", *extra]


def test_a_verl_dump_replays_at_the_batch_it_generated_and_says_so(tmp_path, capsys):
    verl_run(tmp_path / "verl", groups=12)
    assert main(_replay(tmp_path / "verl", "--whole-run")) == 0
    printed = capsys.readouterr().out
    assert "rollout_batch_size 12, over_sampling_batch_size 12 (the dump's own: the groups a step holds" in printed
    assert main(_replay(tmp_path / "verl", "--whole-run", "--over-sampling-batch-size", "24")) == 0
    assert "over_sampling_batch_size 24 (--over-sampling-batch-size)" in capsys.readouterr().out


def test_a_kept_only_dump_states_its_wave_size_unknown_prints_the_bias_and_names_no_best_row(tmp_path, capsys):
    verl_run(tmp_path / "verl", groups=12)
    assert main(_replay(tmp_path / "verl", "--kept-only")) == 0
    printed = capsys.readouterr().out
    assert "over_sampling_batch_size 32 (assumed; unknown: a kept-only dump holds neither" in printed
    assert "no best row (--kept-only)" in printed and "zero-std share is 0.50" in printed
    assert not any(line.startswith(("best within", "nothing saves")) for line in printed.splitlines())
    trace = load_outcomes(tmp_path / "verl", options=DumpOptions(KEPT_ONLY))
    assert trace.run is not None and trace.run.over_sampling_batch_size is None


def test_a_whole_run_replay_still_names_its_best_row(tmp_path, capsys):
    verl_run(tmp_path / "verl", groups=12)
    assert main(_replay(tmp_path / "verl", "--whole-run")) == 0
    assert any(line.startswith(("best within", "nothing saves")) for line in capsys.readouterr().out.splitlines())


@given(st.dictionaries(st.integers(0, 50), st.integers(1, 64), min_size=1, max_size=12))
def test_the_wave_size_is_the_most_common_count_and_never_below_any_tied_one(per_step):
    size = wave_size_of(per_step)
    counts = list(per_step.values())
    assert counts.count(size) == max(map(counts.count, counts))
    assert all(size >= c for c in counts if counts.count(c) == counts.count(size))


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=20), min_size=1, max_size=8))
def test_a_slime_dumps_groups_drawn_per_step_count_the_held_and_the_aborted(steps):
    """Groups numbered in order over the steps; each step keeps some of its own (True) and aborts the rest, but
    always holds its last one (slime's dump holds the group that filled the batch)."""
    numbers, drawn, g = {}, {}, 0
    for step, kept in enumerate(steps):
        kept = [*kept[:-1], True]
        numbers[step] = [g + i for i, keep in enumerate(kept) if keep]
        drawn[step] = len(kept)
        g += len(kept)
    got = drawn_per_step(numbers)
    assert {s: got[s] for s in list(got)[1:]} == {s: drawn[s] for s in list(drawn)[1:]}
    assert got[0] <= drawn[0]  # the first step counts from its first held group (earlier aborted ones are unseen)


def test_a_whole_run_verl_trace_carries_its_wave_size(tmp_path):
    verl_run(tmp_path / "verl", groups=10)
    trace = load_outcomes(tmp_path / "verl", options=DumpOptions(WHOLE_RUN))
    assert trace.run.rollout_batch_size == trace.run.over_sampling_batch_size == 10
    assert trace.run.wave_origin.startswith("the dump's own")


# --- the best row's limit: a name of its own -------------------------------------------------------------------

def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({f"p{i}": [0.0, 0.0, 0.5] if i % 2 else [0.25, 0.5] for i in range(24)}))
    return path


def test_the_best_rows_limit_is_best_within_lost_signal_and_the_former_flag_warns(tmp_path, capsys):
    base = ["replay", str(_trace(tmp_path)), "--n-samples-per-prompt", "4", "--seeds", "1", "--no-progress",
            "--prompt-skip", "off", "--wave-size", "fixed"]
    assert main(base + ["--best-within-lost-signal", "0.05"]) == 0
    captured = capsys.readouterr()
    assert "within a lost signal of 0.05 (--best-within-lost-signal)" in captured.out and not captured.err.strip()
    assert main(base + ["--max-lost-signal", "0.05"]) == 0
    captured = capsys.readouterr()
    assert "within a lost signal of 0.05 (--best-within-lost-signal)" in captured.out
    assert "--max-lost-signal is deprecated" in captured.err and "--prompt-skip-max-lost-signal" in captured.err


def test_the_former_flag_and_the_new_one_together_are_one_line_exit_2(tmp_path, capsys):
    assert main(["replay", str(_trace(tmp_path)), "--n-samples-per-prompt", "4", "--no-progress",
                 "--max-lost-signal", "0.1", "--best-within-lost-signal", "0.2"]) == 2
    err = capsys.readouterr().err
    assert "pass only --best-within-lost-signal" in err and len(err.strip().splitlines()) == 1


def test_the_guards_limit_is_its_own_flag_and_reaches_the_predictive_rule(tmp_path, capsys):
    """``--prompt-skip-max-lost-signal`` is the setting (the guard's limit), apart from the best row's limit."""
    path = tmp_path / "long.json"
    path.write_text(json.dumps({f"p{i}": [0.0] * 6 + [0.5] * 2 if i % 2 else [0.25, 0.5] * 4 for i in range(24)}))
    base = ["replay", str(path), "--n-samples-per-prompt", "4", "--seeds", "1", "--no-progress", "--rollout-batch-size",
            "4", "--over-sampling-batch-size", "8", "--prompt-skip", "predictive", "--wave-size", "fixed", "--json"]
    skipped = []
    for limit in ("0", "1"):
        out = tmp_path / f"rows-{limit}.json"
        assert main(base + [str(out), "--prompt-skip-max-lost-signal", limit]) == 0
        skipped.append(next(r["skipped_per_step"] for r in json.loads(out.read_text())
                            if r["prompt_skip"] == "predictive"))
    capsys.readouterr()
    assert skipped[0] < skipped[1]  # a limit of 0 closes the cap once the first step is judged


@pytest.mark.parametrize("every", ["0", "8"])
def test_probe_every_takes_its_values(tmp_path, capsys, every):
    assert main(["replay", str(_trace(tmp_path)), "--n-samples-per-prompt", "4", "--seeds", "1", "--no-progress",
                 "--prompt-skip", "predictive", "--wave-size", "fixed", "--prompt-skip-probe-every", every]) == 0
    assert "replay of" in capsys.readouterr().out
