"""What the fake engine answers in a multi-turn episode: each turn's words, in the dialect a generate function parses.

An episode's plan is drawn from its prompt key and its ordinal among that prompt's episodes, so a run
answers the same again. Every turn but the last is a tool call (or, for retool, sometimes an invalid
action), the last a final answer; a few filler words vary the lengths.

- ``retool`` (slime's ``examples/retool/generate_with_retool.py``): ``<code>print(6*7)</code>`` runs in its
  sandbox, words without a tag are an invalid action (retool answers with a fixed observation), and
  ``Answer: \\boxed{42}`` ends the episode.
- ``shop`` (the project's ``examples/shop_agent``): ``<tool_call> {"name": ..., "arguments": {...}}
  </tool_call>`` for search, maybe view (sometimes an item id the shop does not have: the model's mistake), add
  to cart and check out, then ``done``. The item added is the
  row's label (the right one) or another row's (a wrong one), by the row's ``reward_kind``: ``all_pass``
  always right, ``all_fail`` always wrong, otherwise right for even ordinals.

The words are whitespace-separated, so the harness's word-level tokenizer holds every one of them
(:func:`vocabulary`) and decodes a turn back to the exact text.

Example:
    >>> row = {"label": "red shirt", "metadata": {"prompt_id": "p00", "reward_kind": "all_pass"}}
    >>> turns = plan("shop", row, [row], 0)
    >>> turns[0][-4:], turns[-1]
    (['{"query":', '"red', 'shirt"}}', '</tool_call>'], ['done'])
    >>> set(word for turn in plan("retool", row, [row], 3) for word in turn) <= set(vocabulary([row]))
    True
"""

from __future__ import annotations

import json
import random

DIALECTS = ("retool", "shop")
ANSWER_WORDS = ["answer", "item", "cart", "checkout", "done"]
"""The words of a single-turn answer, and the filler of a multi-turn one."""
RETOOL_CODE = ["<code>print(6*7)</code>", "<code>print(2**10)</code>"]
RETOOL_FINAL = ["Answer:", "\\boxed{42}"]
SHOP_FINAL = ["done"]
UNKNOWN_ITEM = "sku-404"
"""The item id the shop dialect's model sometimes names: not in the shop's catalogue (a model error)."""


def _tool_call(name: str, arguments: dict) -> list[str]:
    return ["<tool_call>", *json.dumps({"name": name, "arguments": arguments}).split(), "</tool_call>"]


def _item_id(name: str) -> str:
    return "-".join(str(name).lower().split())


def _right_item(row: dict, ordinal: int) -> bool:
    kind = (row.get("metadata") or {}).get("reward_kind")
    return kind == "all_pass" or (kind != "all_fail" and ordinal % 2 == 0)


def plan(dialect: str, row: dict, rows: list[dict], ordinal: int) -> list[list[str]]:
    """The words of every turn of the ``ordinal``-th episode of ``row``'s prompt (``rows``: the dataset)."""
    key = (row.get("metadata") or {}).get("prompt_id", row.get("prompt"))
    rng = random.Random(f"{dialect}:{key}:{ordinal}")

    def filler() -> list[str]:
        return [rng.choice(ANSWER_WORDS) for _ in range(rng.randint(0, 2))]

    if dialect == "retool":
        turns = [filler() + ([rng.choice(RETOOL_CODE)] if rng.random() < 0.7 else ["item"])
                 for _ in range(rng.randint(0, 3))]
        return turns + [filler() + RETOOL_FINAL]
    if dialect == "shop":
        label = str(row.get("label", ""))
        others = [str(other.get("label")) for other in rows if other.get("label") not in (None, label)]
        item = _item_id(label if _right_item(row, ordinal) or not others else others[ordinal % len(others)])
        calls = [("search_products", {"query": label})]
        if rng.random() < 0.5:
            calls.append(("view_item", {"item_id": _item_id(label)}))
        elif rng.random() < 0.5:  # the model's mistake: an item id the shop does not have
            calls.append(("view_item", {"item_id": UNKNOWN_ITEM}))
        calls += [("add_to_cart", {"item_id": item}), ("checkout", {})]
        return [filler() + _tool_call(name, arguments) for name, arguments in calls] + [SHOP_FINAL]
    raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}; got {dialect!r}")


def vocabulary(rows: list[dict]) -> list[str]:
    """Every word an answer of either dialect may hold for the prompts of ``rows``, sorted."""
    words = set(ANSWER_WORDS) | set(RETOOL_CODE) | set(RETOOL_FINAL) | set(SHOP_FINAL) | {"item"}
    labels = {str(row["label"]) for row in rows if row.get("label") is not None}
    for label in labels:
        for name, arguments in (("search_products", {"query": label}), ("view_item", {"item_id": _item_id(label)}),
                                ("add_to_cart", {"item_id": _item_id(label)}), ("checkout", {})):
            words.update(_tool_call(name, arguments))
    words.update(_tool_call("view_item", {"item_id": UNKNOWN_ITEM}))
    return sorted(words)
