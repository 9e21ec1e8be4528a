"""slime's and verl's rollout dumps read as a run's trace: exactly the groups written, and every bad input one line.

slime's files are written here as slime writes them (``torch.save({"rollout_id", "samples": [Sample.to_dict()]})``,
with real torch and every field ``Sample.to_dict`` holds); verl's as its trainer writes ``{step}.jsonl``. What is
checked: the trace read back holds, per prompt and step, exactly the written groups' successes, zero-std verdicts
and generated tokens (``sum(loss_mask)`` when aligned); keys are the monitor's; the reader refuses a dump whose
content the user did not state, a "whole run" without a zero-std group, mixed runs, a step twice, unequal groups
and files that are not dumps, each in one line with exit 2; and ``replay`` and ``prompts`` take a dump.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.outcomes.groups import WHOLE_RUN, DumpError, DumpOptions
from shopsim_metrics.outcomes.sources import load_outcomes, source_kind
from shopsim_metrics.judging.prompt_keys import hash_prompt

torch = pytest.importorskip("torch")

PROMPTS = ("What is 2+2?", "Name a prime.", "Sort [3, 1, 2].", "Capital of France?", "Spell 'cat'.")


def slime_sample(group_index: int, index: int, prompt: str, reward, *, length: int = 4, mask=None,
                 status: str = "completed", metadata: dict | None = None, label: str = "x") -> dict:
    """One sample as slime's ``Sample.to_dict()`` writes it (every field of slime's Sample)."""
    return {"group_index": group_index, "index": index, "rollout_id": None, "prompt": prompt,
            "tokens": list(range(length + 3)), "multimodal_inputs": None, "multimodal_train_inputs": None,
            "multimodal_train_input_id": None, "apply_chat_template_kwargs": {}, "response": "r" * length,
            "response_length": length, "label": label, "reward": reward, "loss_mask": mask,
            "weight_versions": ["1"], "rollout_log_probs": [-0.5] * length, "rollout_top_p_token_ids": None,
            "rollout_top_p_token_offsets": None, "rollout_routed_experts": None, "status": status,
            "metadata": metadata or {}, "generate_function_path": None, "custom_rm_path": None,
            "train_metadata": None, "session_id": None, "non_generation_time": 0.0,
            "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0,
                          "completion_token_num": 0},
            "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0}}


def write_slime_step(path: Path, rollout_id: int, samples: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)
    return path


def simple_run(folder: Path, steps: int = 3, groups: int = 2, n: int = 4, *, first_group: int = 0) -> Path:
    """A run without a filter: each step's groups alternate spread and all-fail."""
    g = first_group
    for step in range(steps):
        samples = []
        for j in range(groups):
            for i in range(n):
                reward = float(i % 2) if j % 2 == 0 else 0.0
                samples.append(slime_sample(g, g * n + i, PROMPTS[(step + j) % len(PROMPTS)], reward))
            g += 1
        write_slime_step(folder / f"rollout_{step}.pt", step, samples)
    return folder


# --- what is read equals what was written ---------------------------------------------------------------

group_strategy = st.fixed_dictionaries({
    "prompt": st.sampled_from(PROMPTS),
    "rewards": st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=3, max_size=3),
    "lengths": st.lists(st.integers(0, 12), min_size=3, max_size=3),
    "masked": st.booleans(),
    "truncated": st.booleans(),
})
run_strategy = st.lists(st.lists(group_strategy, min_size=1, max_size=4), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=run_strategy, seed=st.integers(0, 10 ** 6))
def test_a_slime_dump_reads_back_as_exactly_the_groups_written(tmp_path_factory, run, seed):
    folder = tmp_path_factory.mktemp("slime")
    rng = random.Random(seed)
    expected: dict[str, list[tuple]] = {}
    g = 0
    for step, groups in enumerate(run):
        samples = []
        for group in groups:
            tokens = 0
            for i, (reward, length) in enumerate(zip(group["rewards"], group["lengths"])):
                mask = [rng.randint(0, 1) for _ in range(length)] if group["masked"] else None
                tokens += sum(mask) if mask is not None else length
                samples.append(slime_sample(g, 3 * g + i, group["prompt"], reward, length=length, mask=mask,
                                            status="truncated" if group["truncated"] and i == 0 else "completed"))
            rewards = group["rewards"]
            expected.setdefault(hash_prompt(group["prompt"], "x"), []).append(
                (step, sum(r >= 1.0 for r in rewards), max(rewards) == min(rewards), tokens))
            g += 1
        write_slime_step(folder / f"rollout_{step}.pt", step, samples)
    trace = load_outcomes(folder, options=DumpOptions(WHOLE_RUN))
    read = {key: [(v.step, v.successes, v.zero_std, v.tokens) for v in visits]
            for key, visits in zip(trace.prompts, trace.visits)}
    assert read == expected
    assert trace.n_samples == 3 and trace.tokens_recorded
    assert trace.run.steps == len(run)


def test_generated_tokens_follow_slimes_rule_for_multi_turn_masks(tmp_path):
    samples = [slime_sample(0, 0, "q", 1.0, length=5, mask=[1, 1, 0, 0, 1]),   # aligned: the mask counts
               slime_sample(0, 1, "q", 0.0, length=5, mask=[1, 1]),             # not aligned: response_length
               slime_sample(0, 2, "q", 0.0, length=4, mask=None)]
    write_slime_step(tmp_path / "rollout_0.pt", 0, samples)
    trace = load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN))
    assert trace.visits[0][0].tokens == 3 + 5 + 4


def test_a_dump_is_keyed_rewarded_and_judged_by_the_filters_rules(tmp_path):
    n = 4
    samples = []
    for g, key in enumerate(("alpha", "beta")):
        for i in range(n):
            metadata = {"uid": key, **({"shopsim_success": i == 0} if key == "beta" else {})}
            samples.append(slime_sample(g, g * n + i, f"prompt {g}", {"acc": 0.6 if i < 2 else 0.2, "len": 1},
                                        metadata=metadata))
    write_slime_step(tmp_path / "rollout_0.pt", 0, samples)
    options = DumpOptions(WHOLE_RUN, prompt_key="uid", reward_key="acc", success_threshold=0.5)
    trace = load_outcomes(tmp_path, options=options)
    assert trace.prompts == ("alpha", "beta")
    assert [v.successes for v in (trace.visits[0][0], trace.visits[1][0])] == [2, 1]  # threshold; then the flag
    with pytest.raises(DumpError, match="no scored group"):  # a dict reward without --reward-key
        load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN, prompt_key="uid"))


def test_dump_details_directories_globs_and_single_files_read_alike_and_eval_dumps_are_left_out(tmp_path):
    details = tmp_path / "details"
    simple_run(details / "rollout_data")
    write_slime_step(details / "rollout_data" / "eval_0.pt", 0, [slime_sample(99, 999, "eval", 1.0)])
    (details / "train_data").mkdir()
    reads = [load_outcomes(p, options=DumpOptions(WHOLE_RUN))
             for p in (details, details / "rollout_data", str(details / "rollout_data" / "rollout_*.pt"))]
    assert all(r.prompts == reads[0].prompts and r.visits == reads[0].visits for r in reads)
    assert "eval" not in {key for r in reads for key in r.prompts}
    one = load_outcomes(details / "rollout_data" / "rollout_1.pt", options=DumpOptions(WHOLE_RUN))
    assert one.visit_count == 2 and {v.step for visits in one.visits for v in visits} == {1}
    assert source_kind(details) == "slime"


def test_technical_groups_are_left_out_and_counted(tmp_path):
    samples = [slime_sample(0, i, "ok", float(i % 2)) for i in range(2)]
    samples += [slime_sample(1, 2, "broken", 1.0, status="aborted"), slime_sample(1, 3, "broken", None)]
    write_slime_step(tmp_path / "rollout_0.pt", 0, samples)
    trace = load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN))
    assert trace.visit_count == 1 and any("1 technical groups of 2 left out" in note for note in trace.notes)


def test_groups_missing_between_the_group_numbers_are_counted_as_aborted(tmp_path):
    n = 2
    for step, kept in enumerate(([0, 2], [4, 5])):  # slime started groups 0..5; 1 and 3 finished too late
        write_slime_step(tmp_path / f"rollout_{step}.pt", step,
                         [slime_sample(g, g * n + i, f"p{g % 3}", float(i)) for g in kept for i in range(n)])
    trace = load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN))
    assert any(note.startswith("2 groups slime started are not in the dump") and "aborted" in note
               for note in trace.notes)


# --- whole run or kept groups ------------------------------------------------------------------------------

def kept_only_run(folder: Path, steps: int = 10) -> Path:
    """A run whose filter kept only groups with spread (as slime's check_reward_nonzero_std does)."""
    n, g = 4, 0
    for step in range(steps):
        samples = []
        for _ in range(4):
            samples += [slime_sample(g, g * n + i, PROMPTS[g % 5], float(i % 2)) for i in range(n)]
            g += 2  # every other group was dropped
        write_slime_step(folder / f"rollout_{step}.pt", step, samples)
    return folder


def test_a_dump_whose_content_is_not_stated_is_refused_in_one_line(tmp_path, capsys):
    simple_run(tmp_path)
    assert main(["replay", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--whole-run" in err and "--kept-only" in err and "record_all_samples" in err


def test_a_whole_run_without_one_zero_std_group_is_refused_and_kept_only_says_its_bias(tmp_path, capsys):
    kept_only_run(tmp_path)
    assert main(["prompts", str(tmp_path), "--whole-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not one of its 40 scored groups is zero-std" in err
    assert main(["prompts", str(tmp_path), "--kept-only"]) == 0
    out = capsys.readouterr().out
    assert "figures biased (--kept-only)" in out and "understated" in out and "record_all_samples" in out


def test_few_groups_without_zero_std_are_not_taken_for_a_filter(tmp_path):
    kept_only_run(tmp_path, steps=2)  # 8 groups: too few to tell
    assert load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN)).visit_count == 8


# --- bad input ---------------------------------------------------------------------------------------------

class NotPlainData:  # an object torch's safe loader refuses (a pickle that could run code)
    pass


def _bad_slime(tmp_path: Path, case: str) -> Path:
    folder = tmp_path / case
    if case == "not torch":
        folder.mkdir()
        (folder / "rollout_0.pt").write_bytes(b"\x00garbage" * 10)
    elif case == "unsafe object":
        folder.mkdir()
        torch.save({"rollout_id": 0, "samples": [NotPlainData()]}, folder / "rollout_0.pt")
    elif case == "not a dump":
        folder.mkdir()
        torch.save({"weights": [1, 2]}, folder / "rollout_0.pt")
    elif case == "step twice":
        simple_run(folder, steps=2)
        write_slime_step(folder / "copy.pt", 1, [slime_sample(50, 200 + i, "q", float(i % 2)) for i in range(4)])
    elif case == "group in two steps":
        simple_run(folder, steps=1)
        write_slime_step(folder / "rollout_1.pt", 1, [slime_sample(1, 100 + i, "q", float(i % 2)) for i in range(4)])
    elif case == "two runs":
        simple_run(folder, steps=2, first_group=40)
        write_slime_step(folder / "rollout_2.pt", 2, [slime_sample(3, 100 + i, "q", float(i % 2)) for i in range(4)])
    elif case == "unequal groups":
        simple_run(folder, steps=1)
        write_slime_step(folder / "rollout_1.pt", 1, [slime_sample(9, 100 + i, "q", float(i % 2)) for i in range(6)])
    elif case == "no group_index":
        sample = slime_sample(0, 0, "q", 1.0)
        sample["group_index"] = None
        write_slime_step(folder / "rollout_0.pt", 0, [sample])
    elif case == "no step number":
        write_slime_step(folder / "rollout_0.pt", "eval_0", [slime_sample(0, 0, "q", 1.0)])
    elif case == "only eval":
        write_slime_step(folder / "eval_0.pt", 0, [slime_sample(0, 0, "q", 1.0)])
    return folder


@pytest.mark.parametrize("case, message", [
    ("not torch", "not a slime rollout dump torch can load safely"),
    ("unsafe object", "not a slime rollout dump torch can load safely"),
    ("not a dump", "expected a dict with 'rollout_id' and a 'samples' list"),
    ("step twice", "step 1 twice"),
    ("group in two steps", "group 1 is in step 0 and step 1"),
    ("two runs", "step 2's groups are numbered before step 1's"),
    ("unequal groups", "groups of unequal size: step 1's group of prompt"),
    ("no group_index", "has no integer group_index"),
    ("no step number", "not a step number"),
    ("only eval", "only evaluation dumps"),
])
def test_a_bad_slime_dump_is_one_line_exit_2(tmp_path, capsys, case, message):
    folder = _bad_slime(tmp_path, case)
    assert main(["replay", str(folder), "--whole-run", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_without_torch_the_slime_reader_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    simple_run(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # `import torch` raises ImportError
    assert main(["replay", str(tmp_path), "--whole-run", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "needs torch" in err


def test_dump_options_given_for_the_projects_records_are_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "steps.jsonl").write_text('{"rollout_id": 0}\n')
    assert main(["prompts", str(run_dir), "--kept-only"]) == 2
    assert "is for a framework's dump" in capsys.readouterr().err


# --- verl --------------------------------------------------------------------------------------------------

def write_verl_step(folder: Path, step: int, rows: list[dict], name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{step}.jsonl")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=st.lists(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=1,
                             max_size=len(PROMPTS)), min_size=1, max_size=4), seed=st.integers(0, 10 ** 6))
def test_a_verl_dump_reads_back_grouped_by_prompt_whatever_the_row_order(tmp_path_factory, run, seed):
    folder = tmp_path_factory.mktemp("verl")
    rng = random.Random(seed)
    expected: dict[str, list[tuple]] = {}
    for step, groups in enumerate(run, start=1):  # verl's global steps start at 1
        rows = []
        for prompt, scores in zip(PROMPTS, groups):
            rows += [{"input": prompt, "output": "o", "gts": "g", "score": s, "step": step, "acc": s} for s in scores]
            expected.setdefault(hash_prompt(prompt), []).append((step, sum(scores), max(scores) == min(scores)))
        rng.shuffle(rows)
        write_verl_step(folder, step, rows)
    trace = load_outcomes(folder, options=DumpOptions(WHOLE_RUN))
    read = {key: [(v.step, v.successes, v.zero_std) for v in visits] for key, visits in zip(trace.prompts, trace.visits)}
    assert read == expected and trace.n_samples == 3 and not trace.tokens_recorded


def test_verls_reward_column_and_success_threshold(tmp_path):
    rows = [{"input": "q", "output": "o", "score": -1.0, "acc": a, "step": 1} for a in (1.0, 0.0, 1.0, 1.0)]
    write_verl_step(tmp_path, 1, rows)
    assert load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN)).visits[0][0].successes == 0
    assert load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN, reward_key="acc")).visits[0][0].successes == 3
    lenient = DumpOptions(WHOLE_RUN, success_threshold=-1.0)
    assert load_outcomes(tmp_path, options=lenient).visits[0][0].successes == 4


@pytest.mark.parametrize("case, message", [
    ("not json", "not JSON"),
    ("no input", "expected a JSON object with 'input'"),
    ("two steps in a file", "rows of 2 steps in one file"),
    ("step twice", "step 1 twice"),
    ("unequal groups", "groups of unequal size"),
    ("empty", "no row"),
])
def test_a_bad_verl_dump_is_one_line_exit_2(tmp_path, capsys, case, message):
    good = [{"input": p, "output": "o", "score": float(i % 2), "step": 1} for p in PROMPTS[:2] for i in range(2)]
    folder = tmp_path / "verl"
    write_verl_step(folder, 1, good)
    if case == "not json":
        (folder / "2.jsonl").write_text("{not json\n")
    elif case == "no input":
        write_verl_step(folder, 2, [{"output": "o", "score": 1.0, "step": 2}])
    elif case == "two steps in a file":
        write_verl_step(folder, 2, [dict(good[0], step=2), dict(good[1], step=3)])
    elif case == "step twice":
        write_verl_step(folder, 1, good, name="01.jsonl")
    elif case == "unequal groups":
        write_verl_step(folder, 2, [dict(r, step=2) for r in good] + [dict(good[0], step=2)])
    elif case == "empty":
        (folder / "2.jsonl").write_text("\n")
    assert main(["prompts", str(folder), "--whole-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


# --- the commands ------------------------------------------------------------------------------------------

def test_replay_and_prompts_take_a_slime_dump(tmp_path, capsys):
    simple_run(tmp_path / "dump", steps=6, groups=4)
    out = tmp_path / "skip.jsonl"
    assert main(["prompts", str(tmp_path / "dump"), "--whole-run", "--out", str(out), "--min-visits", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(PROMPTS)} prompts tracked over 6 steps" in printed
    assert out.exists()
    assert main(["replay", str(tmp_path / "dump"), "--whole-run", "--seeds", "1", "--no-progress",
                 "--over-sampling-batch-size", "4"]) == 0
    printed = capsys.readouterr().out
    assert "slime's rollout dumps, 6 files, every group trained, no dynamic filter" in printed
    assert "tokens: the recorded response tokens" in printed
    assert "rollout_batch_size 4, over_sampling_batch_size 4" in printed


def test_replay_of_a_kept_only_dump_says_the_figures_are_biased(tmp_path, capsys):
    kept_only_run(tmp_path)
    assert main(["replay", str(tmp_path), "--kept-only", "--seeds", "1", "--no-progress",
                 "--prompt-skip", "off", "--wave-size", "fixed"]) == 0
    printed = capsys.readouterr().out
    assert "note: figures biased (--kept-only)" in printed and "dropped by the dynamic filter" in printed


def test_replay_takes_a_verl_dump(tmp_path, capsys):
    for step in range(1, 5):
        write_verl_step(tmp_path, step, [{"input": p, "output": "o", "score": float(i < k), "step": step}
                                         for k, p in enumerate(PROMPTS) for i in range(4)])
    assert main(["replay", str(tmp_path), "--whole-run", "--seeds", "1", "--no-progress",
                 "--prompt-skip", "off", "--wave-size", "fixed"]) == 0
    printed = capsys.readouterr().out
    assert "verl's rollout dumps, 4 files" in printed and "the token model" in printed
