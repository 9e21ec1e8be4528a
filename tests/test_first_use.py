"""What a new user tripped on, on a fresh clone: each input misread or output misleading, pinned by its fix.

Flags: every parser takes a flag only spelt in full (argparse's prefix matching read ``tune --rollout
fully-async`` as ``--rollout-batch-size``), and a misspelt flag gets the nearest one ("did you mean").
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from shopsim_metrics.cli import _commands, build_parser, main
from shopsim_metrics.judging.prompt_keys import hash_prompt

ROOT = Path(__file__).resolve().parents[1]


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    return err


# --- flags ------------------------------------------------------------------------------------------------

def test_no_parser_takes_an_abbreviated_flag(capsys):
    parser = build_parser()
    assert all(not command.allow_abbrev for command in [parser, *_commands(parser)])
    err = _error(capsys, ["tune", "--agent", "--rollout", "fully-async"])
    assert "--rollout-batch-size: must be" not in err
    assert "--rollout is an option of shopsim-metrics demo, not of shopsim-metrics tune" in err
    err = _error(capsys, ["replay", "t.json", "--seed", "2"])
    assert "unrecognized arguments: --seed 2; did you mean --seeds?" in err


def test_every_argument_parser_in_the_project_refuses_abbreviations():
    found = [f"{path.relative_to(ROOT)}:{number}" for folder in ("shopsim_metrics", "filter", "benchmarks", "tests")
             for path in sorted((ROOT / folder).rglob("*.py")) if path.name != Path(__file__).name
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if "ArgumentParser(" in line and "allow_abbrev=False" not in line and ">>>" not in line]
    assert found == []


@pytest.mark.parametrize("argv, hint", [
    (["replay", "t.json", "--sedes", "2"], "did you mean --seeds?"),
    (["inspect", "run", "--jsn"], "did you mean --json?"),
    (["dashboard", "html", "run", "--ot", "x.html"], "did you mean --out?"),
    (["replay", "t.json", "--n-samples", "4"], "did you mean --n-samples-per-prompt?"),
    (["tune", "--stpes", "3", "--sed", "1"], "--stpes: did you mean --steps?; --sed: did you mean --seed?"),
])
def test_a_misspelt_flag_gets_the_nearest_one_and_the_commands_help(capsys, argv, hint):
    err = _error(capsys, argv)
    assert hint in err and f"(see shopsim-metrics {' '.join(argv[:2] if argv[0] == 'dashboard' else argv[:1])} " \
                           "--help)" in err


def test_a_flag_without_a_near_one_gets_no_guess(capsys):
    err = _error(capsys, ["inspect", "run", "--zzzzzz"])
    assert "did you mean" not in err and "unrecognized arguments: --zzzzzz" in err


def test_parse_args_of_a_plain_parser_is_untouched():
    assert argparse.ArgumentParser(allow_abbrev=False).parse_args([]) == argparse.Namespace()


# --- inputs misread -----------------------------------------------------------------------------------------

def write_verl_run(folder: Path, prompts=("q0", "q1", "q2"), steps=(1, 2, 3), n: int = 4) -> Path:
    """verl's ``trainer.rollout_data_dir``: per step a ``{step}.jsonl``, n rows per drawn prompt."""
    folder.mkdir(parents=True, exist_ok=True)
    for step in steps:
        rows = [{"input": prompt, "output": "a", "score": float(i < k % (n + 1)), "step": step}
                for k, prompt in enumerate(prompts) for i in range(n)]
        (folder / f"{step}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_replay_of_a_file_that_is_no_trace_says_so_not_that_a_flag_is_missing(tmp_path, capsys):
    picture = tmp_path / "pic.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert main(["replay", str(picture)]) == 2
    err = capsys.readouterr().err
    assert "pic.png: not a JSON trace (it does not start with '{')" in err and "--n-samples-per-prompt" not in err


def test_the_directory_above_dumps_names_the_dumps_below_it(tmp_path, capsys):
    write_verl_run(tmp_path / "runs" / "a")
    write_verl_run(tmp_path / "runs" / "b")
    for flags in ([], ["--whole-run"]):
        assert main(["replay", str(tmp_path / "runs"), *flags]) == 2
        err = capsys.readouterr().err
        assert "this package's records" not in err and "no such file" not in err
        assert f"the directories below it hold dumps: {tmp_path / 'runs' / 'a'} (verl's), " in err and "give one" in err


def test_n_samples_per_prompt_given_for_a_dump_is_refused_not_ignored(tmp_path, capsys):
    run = write_verl_run(tmp_path / "run")
    assert main(["replay", str(run), "--whole-run", "--n-samples-per-prompt", "8"]) == 2
    assert "--n-samples-per-prompt is a JSON trace's group size; verl's dump has its own" in capsys.readouterr().err


def test_n_samples_per_prompt_other_than_the_records_own_is_refused(tmp_path, capsys):
    from dashboard_records import make_records
    from shopsim_metrics.sinks import JsonlSink

    sink = JsonlSink(tmp_path / "run", fsync=False)
    for record in make_records(terminate=False):
        sink.emit(record)
    sink.close()
    assert main(["replay", str(tmp_path / "run"), "--n-samples-per-prompt", "3", "--seeds", "1", "--no-progress"]) == 2
    assert "--n-samples-per-prompt 3 is a JSON trace's group size; the records say their own (8)" in \
        capsys.readouterr().err


# --- dumps as users write them ----------------------------------------------------------------------------

def test_a_prompt_drawn_twice_in_one_verl_batch_is_two_groups_with_a_note(tmp_path, capsys):
    from shopsim_metrics.outcomes.groups import WHOLE_RUN, DumpOptions
    from shopsim_metrics.outcomes.sources import load_outcomes

    run = write_verl_run(tmp_path / "run", prompts=("q0", "q1", "q2", "q0"))
    trace = load_outcomes(run, options=DumpOptions(WHOLE_RUN))
    assert trace.n_samples == 4 and trace.visit_count == 12 and len(trace.prompts) == 3
    first_step = [visit.successes for visit in trace.visits[trace.prompts.index(hash_prompt("q0"))] if visit.step == 1]
    assert first_step == [0, 3]  # its two groups of step 1: 0 of 4 and 3 of 4 successes
    assert any("a prompt drawn again in the same step" in note for note in trace.notes)
    assert main(["replay", str(run), "--whole-run", "--no-progress", "--seeds", "1"]) == 0
    assert "files of two runs" not in capsys.readouterr().err


def test_a_slime_dump_with_numpy_rewards_is_read(tmp_path):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    from shopsim_metrics.outcomes.groups import WHOLE_RUN, DumpOptions
    from shopsim_metrics.outcomes.sources import load_outcomes

    kinds = (np.float32, np.float64, np.int64)
    for step in range(2):
        samples = [{"group_index": 2 * step + g, "index": 8 * step + 4 * g + i, "prompt": f"p{g}", "status": "completed",
                    "reward": kinds[(g + i) % 3](i % 2 if g == 0 else 0), "response_length": 3,
                    "metadata": {"shopsim_success": np.bool_(g == 0 and i % 2)}}
                   for g in range(2) for i in range(4)]
        torch.save({"rollout_id": step, "samples": samples}, tmp_path / f"rollout_{step}.pt")
    trace = load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN))
    assert trace.visit_count == 4 and not trace.notes  # no group left out as technical
    assert sorted(v.successes for visits in trace.visits for v in visits) == [0, 0, 2, 2]


def test_no_error_message_carries_a_terminal_escape(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    import datetime

    torch.save({"rollout_id": 0, "samples": [{"when": datetime.date(2026, 1, 1)}]}, tmp_path / "rollout_0.pt")
    assert main(["replay", str(tmp_path), "--whole-run"]) == 2
    err = capsys.readouterr().err
    assert "not a slime rollout dump torch can load safely" in err and "\x1b" not in err
    assert main(["replay", str(tmp_path / "a\x1bb\x07.json")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "a\\x1bb\\x07.json" in err


# --- a launch checked before it runs ----------------------------------------------------------------------

def test_preflight_refuses_a_sample_hook_path_that_does_not_load(tmp_path, capsys):
    from test_preflight import launch

    typo = "shopsimrl.slime_runtime.record_generated_sampel"
    assert main(["preflight", "--", *launch(tmp_path, **{"--rollout-sample-hook-path": typo})]) == 2
    err = capsys.readouterr().err
    assert f"error: --rollout-sample-hook-path: {typo} does not load (AttributeError" in err
    argv = launch(tmp_path) + ["--rollout-sample-hook-path", "math.sqrt"]  # slime's flag may be repeated: each checked
    assert main(["preflight", "--", *argv]) == 2
    assert "--rollout-sample-hook-path: math.sqrt cannot be called as slime calls it" in capsys.readouterr().err
    assert main(["preflight", "--", *launch(tmp_path)]) == 0
    assert "--rollout-sample-hook-path shopsimrl.slime_runtime.record_generated_sample" in capsys.readouterr().out


# --- prompts by their text ----------------------------------------------------------------------------------

def test_a_dumps_prompt_text_is_in_the_skip_list_and_on_the_prompts_page(tmp_path, capsys):
    from shopsim_metrics.dashboards.prompts_page import read_page_data
    from shopsim_metrics.prompts.command import read_skip_list

    run = write_verl_run(tmp_path / "run", prompts=("Name a prime.", "What is 2+2?"), steps=(1, 2, 3))
    assert main(["prompts", str(run), "--whole-run", "--out", str(tmp_path / "skip.jsonl")]) == 0
    assert "the prompt is the dump's text" in capsys.readouterr().out
    entries = read_skip_list(tmp_path / "skip.jsonl")
    assert [(e["prompt_key"], e["prompt"]) for e in entries] == [(hash_prompt("Name a prime."), "Name a prime.")]
    assert main(["dashboard", "html", str(run), "--whole-run", "--out", str(tmp_path / "prompts.html")]) == 0
    page = (tmp_path / "prompts.html").read_text()
    data = read_page_data(page)
    assert dict(zip(data["keys"], data["texts"])) == {hash_prompt(p): p for p in ("Name a prime.", "What is 2+2?")}
    # verl records no tokens: the page opens sorted by zero-std visits, not by an empty wasted-tokens column
    assert data["tokens_known"] is False and data["sort"] == "zero_std"
    assert "success by visit\n(0 to 4/4)" in page  # the sparklines' scale


def test_prompt_data_written_with_a_chat_template_maps_to_the_keys(tmp_path, capsys, monkeypatch):
    import shopsim_metrics.prompts.command as prompts_command

    def template(messages, tools):  # what a tokenizer's chat template does, in small
        return "".join(f"<|{m['role']}|>{m['content']}" for m in messages) + "<|assistant|>"

    asked = []
    monkeypatch.setattr(prompts_command, "tokenizer_chat_template",
                        lambda checkpoint, kwargs: asked.append((checkpoint, kwargs)) or template)
    questions = [f"Question {i}?" for i in range(7)]
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"input": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": q}]}) + "\n" for q in questions))
    templated = [template([{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}], None)
                 for q in questions]
    run = write_verl_run(tmp_path / "run", prompts=templated)  # verl dumps the templated text it generated from
    out = tmp_path / "skip.jsonl"
    argv = ["prompts", str(run), "--whole-run", "--out", str(out), "--prompt-data", str(data), "--min-visits", "1"]
    assert main(argv) == 0
    assert "0 of" in capsys.readouterr().out  # as the launch hashed them, the plain rows match nothing
    assert main([*argv, "--apply-chat-template", "--hf-checkpoint", "/ckpt", "--apply-chat-template-kwargs",
                 '{"enable_thinking": false}']) == 0
    printed = capsys.readouterr().out
    entries = prompts_command.read_skip_list(out)
    line_of = {hash_prompt(text): number for number, text in enumerate(templated, 1)}
    assert entries and all(e["data_line"] == line_of[e["prompt_key"]] for e in entries)
    assert entries[0]["prompt"][1]["content"].startswith("Question")  # the dataset's row, as written
    assert f"{len(entries)} of {len(entries)} found" in printed and asked == [("/ckpt", {"enable_thinking": False})]
    assert main([*argv, "--apply-chat-template"]) == 2
    assert "--apply-chat-template needs --hf-checkpoint" in capsys.readouterr().err


# --- the demo run twice -------------------------------------------------------------------------------------

@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B offline in a temp dir, no network, no key; its runs under the demo's own ``<out>/run/wandb``, as on a
    fresh clone (no WANDB_DIR)."""
    import wandb

    root = tmp_path / "wb"
    for var, sub in (("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"),
                     ("WANDB_ARTIFACT_DIR", "artifacts")):
        (root / sub).mkdir(parents=True)
        monkeypatch.setenv(var, str(root / sub))
    for var, value in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"), ("WANDB_CONSOLE", "off"),
                       ("WANDB_DISABLE_GIT", "true"), ("WANDB_BASE_URL", "http://127.0.0.1:9"),
                       ("NETRC", str(root / "no-netrc"))):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    wandb.teardown()
    yield
    wandb.teardown()


def test_a_second_demo_says_what_it_replaces_and_leaves_nothing_of_the_first(tmp_path, offline_wandb, capsys):
    out = tmp_path / "demo_out"
    assert main(["demo", "--out", str(out), "--steps", "3", "--no-progress"]) == 0
    for name in ("skip.jsonl", "dashboard-prompts.html"):  # what the README's commands derive from the run
        (out / name).write_text("of the first run\n")
    keep = out / "notes.txt"
    keep.write_text("mine\n")
    capsys.readouterr()
    assert main(["demo", "--out", str(out), "--steps", "3", "--no-progress", "--prompt-skip", "predictive"]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert said.startswith(f"replacing the previous demo in {out} (steps 3, seed 0, prompt_skip off,")
    assert "removed steps.jsonl, 1 W&B offline run(s), dashboard-prompts.html, skip.jsonl" in said
    assert not (out / "skip.jsonl").exists() and not (out / "dashboard-prompts.html").exists()
    assert keep.read_text() == "mine\n"
    assert len(list((out / "run" / "wandb").glob("offline-run-*"))) == 1


# --- small things ---------------------------------------------------------------------------------------------

def test_tunes_table_has_a_legend_for_every_column(capsys):
    assert main(["tune", "--zero-std-rate", "0.3", "--steps", "3", "--candidates", "16,32", "--no-widen",
                 "--jobs", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.startswith("over "))
    legend = "\n".join(out[out.index(header):])
    named = {word for line in legend.splitlines()[3:] for word in re.findall(r"[\w.()/-]+", line)}
    assert set(header.split()) <= named, set(header.split()) - named
    assert "P(limit)    share of steps whose technical streak reached 8 consecutive failed groups" in legend
    assert "ok          yes: within both targets" in legend and "wasted      samples of judged groups" in legend


def test_the_fully_async_demos_progress_shows_no_waves(tmp_path, offline_wandb, capsys):
    assert main(["demo", "--out", str(tmp_path / "out"), "--steps", "4", "--rollout", "fully-async"]) == 0
    printed = capsys.readouterr()
    progress = [line for line in (printed.out + printed.err).splitlines() if "simulated rollout steps:" in line]
    assert progress and not any("None" in line or "waves" in line for line in progress), progress


def test_inspects_note_column_says_what_stands_out_in_a_step(tmp_path, capsys):
    from shopsim_metrics.record.records import StepRecord
    from shopsim_metrics.sinks import JsonlSink

    sink = JsonlSink(tmp_path / "run", fsync=False)
    for record in (StepRecord(rollout_id=0, wave_count=1), StepRecord(rollout_id=1, wave_count=3, skipped_prompt_count=4,
                                                                       alerts=[{"level": "WARN", "title": "t", "text": "x"}]),
                   StepRecord(rollout_id=2, wave_count=1, terminated=True)):
        sink.emit(record)
    sink.close()
    assert main(["inspect", str(tmp_path / "run")]) == 0
    rows = capsys.readouterr().out.splitlines()[1:4]
    assert rows[1].rstrip().endswith(" 3 waves, 4 skipped, WARN alert") and rows[2].rstrip().endswith(" TERMINATED")
    assert not any(word in rows[0] for word in ("waves", "skipped", "alert", "TERMINATED"))


def test_the_waves_panel_lists_no_adaptive_line_on_a_run_with_fixed_waves():
    from shopsim_metrics.dashboards.data import DashboardData
    from shopsim_metrics.dashboards.html import step_figure_dict
    from shopsim_metrics.dashboards.spec import dashboard_spec

    panel = dashboard_spec().panel("waves")
    fixed = DashboardData(steps=[{"rollout_id": i, "wave_count": 1 + i % 2} for i in range(4)])
    assert [t["meta"] for t in step_figure_dict(panel, fixed)["data"]] == ["wave_count"]
    adaptive = DashboardData(steps=[{"rollout_id": i, "wave_count": 1, "predicted_second_wave_probability": 0.1}
                                    for i in range(4)])
    assert [t["meta"] for t in step_figure_dict(panel, adaptive)["data"]] == ["wave_count",
                                                                             "predicted_second_wave_probability"]


def test_the_chat_template_applied_as_slimes_dataset_applies_it(tmp_path):
    """Against slime's own ``Dataset`` (``--apply-chat-template``): every prompt it builds is found under its
    key. Runs where slime (``SLIME_SRC``) and transformers are importable (the slime venv)."""
    import os
    import sys

    if not os.environ.get("SLIME_SRC"):
        pytest.skip("set SLIME_SRC to a slime checkout (and use a Python with transformers) to run it")
    pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    sys.path.insert(0, os.environ["SLIME_SRC"])
    try:
        from slime.utils.data import Dataset
    finally:
        sys.path.remove(os.environ["SLIME_SRC"])
    from transformers import PreTrainedTokenizerFast

    from shopsim_metrics.prompts.dataset import rows_by_key, tokenizer_chat_template

    words = ["<unk>", "Be", "brief.", "Question", "?"]
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", chat_template=template).save_pretrained(tmp_path / "tok")
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"input": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": f"Question {i}?"}], "label": str(i)})
                            + "\n" for i in range(5)) + json.dumps({"input": "plain text", "label": "x"}) + "\n")
    from transformers import AutoTokenizer

    dataset = Dataset(str(data), AutoTokenizer.from_pretrained(tmp_path / "tok"), None, None, prompt_key="input",
                      label_key="label", apply_chat_template=True)
    rows = rows_by_key(data, label_key="label", chat_template=tokenizer_chat_template(str(tmp_path / "tok")))
    keys = [hash_prompt(sample.prompt, sample.label) for sample in dataset.origin_samples]
    assert [rows[key].line for key in keys] == [1, 2, 3, 4, 5, 6]


def test_a_page_of_100000_prompts_with_their_texts_stays_under_20_mb():
    import dataclasses

    from test_prompts_page import MAX_PAGE_BYTES, _trace

    from shopsim_metrics.dashboards.prompts_page import read_page_data, render_prompts_page

    trace = _trace(100_000, 3)
    trace = dataclasses.replace(trace, texts={key: "a long prompt " * 40 for key in trace.prompts})
    page = render_prompts_page(trace)
    assert len(page.encode()) < MAX_PAGE_BYTES
    assert all(text.startswith("a long prompt") for text in read_page_data(page)["texts"])
