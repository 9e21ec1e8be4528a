"""One way to read a group's samples: :func:`~shopsim_metrics.judging.group_samples.leaves` flattens fanned-out
groups and :func:`~shopsim_metrics.judging.group_samples.read_generated_tokens` counts a rollout's generated tokens;
no other module of the package (the simulator included) writes either rule again.

The scan reads the source with ``ast``: a module flattens a group by hand when it tests whether an item is a list
(or tuple) and, under that test, iterates the item, extends a list with it, or wraps a lone item as ``(item,)``;
a module has its own token rule when it reads a sample's ``loss_mask``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from shopsim_metrics.judging.group_samples import group_tokens, leaves, read_generated_tokens
from shopsim_metrics.simulator.samples import SimSample
from conftest import fifo_batches, run_scripted_step

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "shopsim_metrics" / "judging" / "group_samples.py"
SOURCES = sorted([*(ROOT / "shopsim_metrics").rglob("*.py"), *(ROOT / "filter").rglob("*.py")])
SEQUENCE_TYPES = {"list", "tuple"}


def _tested(test: ast.expr) -> tuple[str, bool] | None:
    """``(x, False)`` when ``test`` holds ``isinstance(x, list)`` or ``isinstance(x, (list, tuple))``, ``(x, True)``
    for ``isinstance(x[0], ...)`` (is the group fanned out?), else None."""
    for node in ast.walk(test):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2):
            continue
        subject, kinds = node.args
        names = {e.id for e in (kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]) if isinstance(e, ast.Name)}
        if not names & SEQUENCE_TYPES:
            continue
        subscripted = isinstance(subject, ast.Subscript)
        while isinstance(subject, ast.Subscript):
            subject = subject.value
        if isinstance(subject, ast.Name):
            return subject.id, subscripted
    return None


def _uses_as_a_group(body: list[ast.AST], name: str) -> bool:
    """Whether ``body`` iterates ``name``, extends something with it, or wraps it as a one-item sequence."""
    for node in (n for part in body for n in ast.walk(part)):
        iterated = [node.iter] if isinstance(node, (ast.For, ast.comprehension)) else []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "extend":
            iterated += node.args
        if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == 1:
            iterated += node.elts
        if any(isinstance(e, ast.Name) and e.id == name for e in iterated):
            return True
    return False


def _targets(node: ast.AST) -> set[str]:
    """The names a ``for`` loop or a comprehension binds to each item."""
    if isinstance(node, ast.For):
        return {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    return set()


def flattened_by_hand(source: str) -> list[int]:
    """The lines of ``source`` that flatten a group by hand: under a test whether a group's first item is a list,
    or whether an item of a loop over a group is one, the item is iterated, extended with or wrapped alone."""
    found: set[int] = set()
    tree = ast.parse(source)
    loops = [(loop, _targets(loop)) for loop in ast.walk(tree) if _targets(loop)]
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.IfExp)) or (tested := _tested(node.test)) is None:
            continue
        name, subscripted = tested
        body = node.body if isinstance(node, ast.If) else [node.body, node.orelse]
        in_a_loop = any(name in names and any(n is node for n in ast.walk(loop)) for loop, names in loops)
        alone = (isinstance(node, ast.IfExp) and isinstance(node.body, ast.Name) and node.body.id == name
                 and _uses_as_a_group([node.orelse], name))  # item if isinstance(item, list) else (item,)
        if subscripted or (in_a_loop and (alone or _uses_as_a_group(body, name))):
            found.add(node.lineno)
    return sorted(found)


def reads_loss_mask(source: str) -> list[int]:
    """The lines of ``source`` that read a sample's ``loss_mask`` (an attribute read, or ``getattr(s, "loss_mask")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr == "loss_mask" and isinstance(node.ctx, ast.Load)
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")):  # an episode's own mask
            found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "loss_mask"):
            found.append(node.lineno)
    return found


def test_the_scan_finds_each_way_the_house_once_flattened_a_group() -> None:
    ways = {
        "for item in group:\n    parts = item if isinstance(item, (list, tuple)) else (item,)\n": [2],
        "for item in group:\n    if isinstance(item, (list, tuple)):\n        out.extend(item)\n": [2],
        "for item in g:\n    if isinstance(item, (list, tuple)):\n        for s in item:\n            f(s)\n": [2],
        "calls = flatten(group) if group and isinstance(group[0], (list, tuple)) else group\n"
        "for k in order:\n    if group and isinstance(group[0], (list, tuple)):\n        samples.extend(group)\n": [1, 3],
        "[s for item in items for s in (item if isinstance(item, (list, tuple)) else (item,))]\n": [1],
    }
    for source, lines in ways.items():
        assert flattened_by_hand(source) == lines, source
    kept = ("if isinstance(mask, (list, tuple)) and len(mask) == n:\n    data = bytes(mask)\n",
            "for row in rows if isinstance(rows, list) else [rows]:\n    pass\n",
            "if not isinstance(saved, list) or len(saved) != 2:\n    return None\n",
            "[f(a if isinstance(a, list) else []) for a in columns]\n")
    assert [flattened_by_hand(source) for source in kept] == [[], [], [], []]
    assert reads_loss_mask("m = getattr(sample, 'loss_mask', None)\nn = s.loss_mask\ns.loss_mask = self.loss_mask()\n") \
        == [1, 2]


def test_no_module_but_group_samples_flattens_a_group_or_reads_a_loss_mask() -> None:
    hand = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES if path != HOME
            for line in flattened_by_hand(path.read_text())]
    assert hand == [], f"flatten with judging.group_samples.leaves instead: {hand}"
    masks = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES if path != HOME
             for line in reads_loss_mask(path.read_text())]
    assert masks == [], f"count generated tokens with judging.group_samples.read_generated_tokens instead: {masks}"


samples = st.builds(SimSample, index=st.integers(0, 50), response_length=st.integers(0, 40),
                    loss_mask=st.none() | st.lists(st.integers(0, 1), max_size=40))
groups = st.lists(samples | st.lists(samples, max_size=3), max_size=6)


@given(groups)
def test_leaves_keep_every_sample_in_order_and_tokens_count_each_object_once(group: list) -> None:
    flat = leaves(group)
    expected = [s for item in group for s in (item if isinstance(item, list) else [item])]  # the rule, spelt out
    assert flat == expected and all(a is b for a, b in zip(flat, expected))
    distinct = {id(s): s for s in flat}.values()
    assert group_tokens(group) == sum(map(read_generated_tokens, distinct))
    assert group_tokens(group + [group[0]] if group else group) == group_tokens(group)  # listed twice: once


def test_an_unreadable_group_raises_from_leaves_and_counts_nothing() -> None:
    try:
        leaves(None)  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("leaves(None) should raise: the judgement names such a group sample_unreadable")
    assert group_tokens(None) == 0


def test_the_simulated_loop_counts_a_rollouts_tokens_by_the_monitors_rule(wired) -> None:
    """A mask not as long as the response is no mask (slime trains the response): the simulated loop's lengths and
    the record's total are both the response's, for a flat group and a fanned-out one alike (the simulator once
    counted any mask list's 1s)."""
    loop, memory, _ = wired(rollout_batch_size=1, over_sampling_batch_size=1, n_samples_per_prompt=2)

    def make_group(gid: int) -> list:
        odd = SimSample(index=gid * 10, rollout_id=gid * 10, reward=1.0, response_length=6, loss_mask=[1, 0])
        tool = SimSample(index=gid * 10 + 1, rollout_id=gid * 10 + 1, reward=0.0, response_length=4,
                         loss_mask=[1, 0, 0, 1])
        return [odd, tool] if gid % 2 == 0 else [[odd], [tool]]

    for step in range(2):
        outcome = run_scripted_step(loop, step, make_group, fifo_batches(1))
        assert [outcome.response_lengths[gid] for gid in outcome.judged_ids] == [[6, 2]] * len(outcome.judged_ids)
    assert [record.total_token_count for record in memory.records] == [8, 8]
