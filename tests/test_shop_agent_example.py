"""The shop of the multi-turn agent example (``examples/shop_agent/shop_tools.py``), without slime.

Its generate function runs through slime's own ``train.py`` in ``test_slime_train_agent.py``; here, the
parts a user copies and changes: the tools, the tool-call parser, the settings and the injected failures
(reproducible, only in the failing tool, at the rate asked).
"""

from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "shop_agent"))
import shop_tools  # noqa: E402 - the example's directory, put on the path as slime's launch would
from shop_tools import CATALOGUE, TOOLS, Shop, ShopSettings, ToolTimeout, failure_cause, parse_tool_call  # noqa: E402


def test_docstring_examples_run():
    failed, attempted = doctest.testmod(shop_tools)
    assert attempted and not failed


@pytest.mark.parametrize("item_id", sorted(CATALOGUE))
def test_every_item_can_be_found_viewed_and_bought(item_id):
    shop = Shop(ShopSettings(), episode="e")
    name = CATALOGUE[item_id][0]
    assert shop.call("search_products", {"query": name}).splitlines()[0].startswith(f"{item_id}:")
    assert "in stock" in shop.call("view_item", {"item_id": item_id})
    shop.call("add_to_cart", {"item_id": item_id})
    assert shop.call("checkout", {}) == f"order placed: {item_id}" and shop.order == [item_id] and not shop.cart


def test_the_models_mistakes_are_answers_not_failures():
    shop = Shop(ShopSettings(), episode="e")
    assert shop.call("checkout", {}) == "the cart is empty"
    assert shop.call("view_item", {"item_id": "no-such"}) == "no item 'no-such'"
    assert shop.call("pay", {}).startswith("error: no tool 'pay'")
    assert shop.call("add_to_cart", {"sku": "red-shirt"}).startswith("error: ")
    assert shop.order == [] and shop.calls == 4


@given(st.sampled_from(TOOLS), st.dictionaries(st.sampled_from(["query", "item_id"]), st.text(max_size=20), max_size=2),
       st.text(max_size=10))
def test_a_tool_call_reads_back_as_written(name, arguments, before):
    text = f"{before} <tool_call> {json.dumps({'name': name, 'arguments': arguments})} </tool_call>"
    assert parse_tool_call(text) == (name, arguments)


@given(st.text(max_size=40).filter(lambda text: "<tool_call>" not in text))
def test_an_answer_without_a_call_is_final(text):
    assert parse_tool_call(text) is None


@given(st.floats(0.0, 1.0), st.sampled_from(TOOLS), st.integers(0, 5), st.text(max_size=12), st.integers(0, 20))
def test_injected_failures_are_reproducible_and_only_in_the_failing_tool(rate, tool, seed, episode, call):
    settings = ShopSettings(failure_rate=rate, failing_tool=tool, seed=seed)
    assert settings.fails(tool, episode, call) == ShopSettings(failure_rate=rate, failing_tool=tool,
                                                               seed=seed).fails(tool, episode, call)
    assert not any(settings.fails(other, episode, call) for other in TOOLS if other != tool)
    if rate in (0.0, 1.0):
        assert settings.fails(tool, episode, call) == (rate == 1.0)


def test_failures_come_at_the_rate_asked():
    settings = ShopSettings(failure_rate=0.1)
    share = sum(settings.fails("search_products", f"task#{i}", 0) for i in range(4000)) / 4000
    assert 0.08 < share < 0.12


def test_an_injected_failure_raises_with_its_cause():
    shop = Shop(ShopSettings(failure_rate=1.0), episode="e")
    with pytest.raises(ToolTimeout) as raised:
        shop.call("search_products", {"query": "red shirt"})
    assert failure_cause(raised.value) == "ToolTimeout: search_products"


@pytest.mark.parametrize("key, value, message", [
    ("failure_rate", 1.5, "shop_agent_failure_rate must be in [0, 1]; got 1.5"),
    ("failing_tool", "pay", "shop_agent_failing_tool must be one of search_products, view_item, add_to_cart, "
                            "checkout; got 'pay'"),
    ("tool_seconds", -1.0, "shop_agent_tool_seconds must be >= 0; got -1.0"),
    ("tool_seconds", float("nan"), "shop_agent_tool_seconds must be >= 0; got nan"),
    ("max_turns", 0, "shop_agent_max_turns must be >= 1; got 0"),
])
def test_a_bad_setting_names_its_key(key, value, message):
    with pytest.raises(ValueError) as raised:
        ShopSettings.from_args(SimpleNamespace(**{f"shop_agent_{key}": value}))
    assert str(raised.value) == message


def test_settings_come_from_slimes_args():
    args = SimpleNamespace(shop_agent_failure_rate=0.2, shop_agent_tool_seconds=0.5, shopsim_run_dir="x")
    assert ShopSettings.from_args(args) == ShopSettings(failure_rate=0.2, tool_seconds=0.5)
