"""``shopsim-metrics prompts``: the table from a run's records, and the skip list round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard_records import make_records
from shopsim_metrics.record import contract
from shopsim_metrics.cli import main
from shopsim_metrics.prompts.command import read_skip_list
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink


def _verdict(row) -> str:
    if row.reason == contract.REASON_TECHNICAL:
        return "technical"
    if row.reason is None:
        return "spread"
    if not row.success_count:
        return "zero_std_all_fail"
    return "zero_std_all_pass" if row.success_count == row.scorable_rollouts else "zero_std_other"


def verdicts_by_prompt(records: list[StepRecord]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in sorted(records, key=lambda r: r.rollout_id):
        for row in sorted(rec.decisions, key=lambda r: r.order):
            out.setdefault(row.prompt_key, []).append(_verdict(row))
    return out


def write_run(records: list[StepRecord], run_dir: Path) -> Path:
    sink = JsonlSink(run_dir)
    for rec in records:
        sink.emit(rec)
    sink.close()
    return run_dir


@pytest.mark.parametrize("k", [1, 2, 3])
def test_skip_list_round_trips_against_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture, k: int) -> None:
    records = make_records(steps=10, terminate=False)
    run_dir = write_run(records, tmp_path / "run")
    out = tmp_path / "skip.jsonl"
    assert main(["prompts", str(run_dir), "--out", str(out), "--min-visits", str(k)]) == 0
    entries = read_skip_list(out)
    expected = {key: seq for key, seq in verdicts_by_prompt(records).items()
                if len(seq) >= k and seq[-1].startswith("zero_std") and len(set(seq[-k:])) == 1}
    assert expected, "the fixture must hold prompts that were zero-std several times in a row"
    assert {e["prompt_key"] for e in entries} == set(expected)
    for entry in entries:
        seq = expected[entry["prompt_key"]]
        assert entry["verdicts"] == seq[-8:] and entry["visits"] == len(seq) and entry["last_verdict"] == seq[-1]
        run = 0
        for verdict in reversed(seq):
            if verdict != seq[-1]:
                break
            run += 1
        assert entry["zero_std_run"] == run
    wasted = [e["wasted_tokens"] for e in entries]
    assert wasted == sorted(wasted, reverse=True)
    printed = capsys.readouterr().out
    assert f"{len(entries)} prompts with their last {k} visits" in printed
    assert printed.splitlines()[0].split() == ["prompt_key", "visits", "verdicts", "zero_std_run", "zero_std_visits",
                                               "tokens", "wasted_tokens"]


def test_table_lists_the_most_wasted_prompts_first(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    records = make_records(steps=8, terminate=False)
    run_dir = write_run(records, tmp_path / "run")
    assert main(["prompts", str(run_dir), "--top", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    body = [line.split() for line in lines[1:6]]
    wasted = {}
    for rec in records:
        for row in rec.decisions:
            if row.reason == contract.REASON_ZERO_STD:
                wasted[row.prompt_key] = wasted.get(row.prompt_key, 0) + row.response_tokens
    assert [int(cols[-1]) for cols in body] == sorted(wasted.values(), reverse=True)[:5]


@pytest.mark.parametrize("extra", [["--min-visits", "0"], ["--top", "x"]])
def test_bad_values_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, extra) -> None:
    run_dir = write_run(make_records(steps=3, terminate=False), tmp_path / "run")
    assert main(["prompts", str(run_dir), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prompts" in err


def test_missing_run_and_records_without_prompt_keys_are_one_line_errors(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    assert main(["prompts", str(tmp_path / "nowhere")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    records = make_records(steps=2, terminate=False)
    for rec in records:
        for row in rec.decisions:
            row.prompt_key = None
    run_dir = write_run(records, tmp_path / "old")
    assert main(["prompts", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prompt_key" in err


def test_out_is_checked_before_anything_is_printed(tmp_path, capsys) -> None:
    from shopsim_metrics.cli import main

    (tmp_path / "a_file").write_text("x")
    for out in (tmp_path, tmp_path / "a_file" / "skip.jsonl"):  # a directory; a path under a file
        assert main(["prompts", str(tmp_path / "no-run"), "--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(f"shopsim-metrics prompts: error: --out {out}: ")


# --- the skip list mapped back to the launch's dataset ------------------------------------------------------
@pytest.fixture(scope="module")
def pool_run(tmp_path_factory) -> tuple[Path, Path]:
    """The demo's simulated run over its prompt pool (revisited epoch after epoch), and the pool as its --prompt-data."""
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.epochs import write_prompt_data
    from shopsim_metrics.simulator.loop import Simulator

    root = tmp_path_factory.mktemp("pool")
    config = demo_config(steps=16, seed=5)
    Simulator(config, sinks=[JsonlSink(root / "run")]).run()
    return root / "run", write_prompt_data(root / "prompts.jsonl", config.prompt_pool)


def test_prompt_data_maps_every_skip_list_key_to_its_line_and_prompt(pool_run, tmp_path, capsys) -> None:
    from shopsim_metrics.judging.prompt_keys import hash_prompt
    from shopsim_metrics.simulator.epochs import pool_label, pool_prompt

    run, data = pool_run
    out = tmp_path / "skip.jsonl"
    assert main(["prompts", str(run), "--out", str(out)]) == 0
    assert "--prompt-data FILE" in capsys.readouterr().out  # how to map the hashes back is said
    assert {e["data_line"] for e in read_skip_list(out)} == {None}
    assert main(["prompts", str(run), "--out", str(out), "--prompt-data", str(data), "--input-key", "prompt",
                 "--label-key", "label"]) == 0
    entries = read_skip_list(out)
    assert entries and f"{len(entries)} of {len(entries)} found in {data}" in capsys.readouterr().out
    for entry in entries:
        pool_id = entry["data_line"] - 1  # write_prompt_data writes prompt i on line i + 1
        assert entry["prompt"] == pool_prompt(pool_id)
        assert entry["prompt_key"] == hash_prompt(pool_prompt(pool_id), pool_label(pool_id))


def test_prompt_data_read_with_other_keys_than_the_launch_finds_nothing_and_says_why(pool_run, tmp_path,
                                                                                      capsys) -> None:
    run, data = pool_run
    out = tmp_path / "skip.jsonl"
    assert main(["prompts", str(run), "--out", str(out), "--prompt-data", str(data), "--input-key", "prompt"]) == 0
    entries = read_skip_list(out)
    assert entries and {e["data_line"] for e in entries} == {None}
    printed = capsys.readouterr().out
    assert f"0 of {len(entries)} found" in printed and "--label-key" in printed and "--apply-chat-template" in printed


def test_prompt_data_with_the_runs_metadata_key_maps_metadata_ids(tmp_path) -> None:
    from types import SimpleNamespace

    from shopsim_metrics.prompts.dataset import rows_by_key
    from shopsim_metrics.judging.prompt_keys import prompt_key

    data = tmp_path / "prompts.jsonl"
    data.write_text('{"input": "a", "metadata": {"uid": 7}}\n{"input": "b", "metadata": {"uid": "x"}}\n{"input": "c"}\n')
    rows = rows_by_key(data, prompt_key_name="uid")
    sample = SimpleNamespace(prompt="a", label=None, metadata={"uid": 7})
    assert rows[prompt_key([sample], "uid")[0]].line == 1 and rows["x"].line == 2
    assert rows[prompt_key([SimpleNamespace(prompt="c", label=None, metadata={})], "uid")[0]].line == 3  # the hash


@pytest.mark.parametrize("text,expected", [("not json\n", "prompts.jsonl:1: not JSON"),
                                           ('{"input": "a"}\n[1]\n', "prompts.jsonl:2: expected a JSON object")])
def test_a_bad_prompt_data_file_is_one_line_before_anything_is_printed(pool_run, tmp_path, capsys, text,
                                                                        expected) -> None:
    run, _ = pool_run
    data = tmp_path / "prompts.jsonl"
    data.write_text(text)
    assert main(["prompts", str(run), "--out", str(tmp_path / "s.jsonl"), "--prompt-data", str(data)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and expected in captured.err and captured.err.count("\n") == 1
    assert main(["prompts", str(run), "--prompt-data", str(data)]) == 2  # without --out there is nothing to map
    assert "give --out FILE too" in capsys.readouterr().err
