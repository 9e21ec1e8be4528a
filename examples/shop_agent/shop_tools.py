"""The shop the agent example talks to: a small in-process catalogue, four tools, and injected failures.

An episode gets its own :class:`Shop` (its own cart). The model calls the tools by name with JSON
arguments (:func:`parse_tool_call` reads them from its text); every tool returns the text the model
sees next. A mistake of the model (an unknown tool, arguments that do not fit, an item id that does not
exist) is an ordinary answer, which :meth:`Shop.run` names (:func:`model_mistake`: the tool call's error of
kind ``"model"``); checking out an empty cart is an answer and no mistake. A failure of the environment is an
exception: :class:`ToolTimeout`, injected at a set rate into one tool (:class:`ShopSettings`), reproducibly,
so a run can be compared with what was injected; one tool can be made slow (``slow_tool``, ``slow_seconds``).

Example:
    >>> shop = Shop(ShopSettings(), episode="p00#0")
    >>> print(shop.call("search_products", {"query": "red shirt"}))
    red-shirt: red shirt, 19.90
    >>> shop.call("add_to_cart", {"item_id": "red-shirt"}), shop.call("checkout", {})
    ('added red-shirt; cart: red-shirt', 'order placed: red-shirt')
    >>> shop.order
    ['red-shirt']
    >>> shop.run("view_item", {"item_id": "sku-404"})
    ("no item 'sku-404'", 'UnknownItem: sku-404')
    >>> parse_tool_call('<tool_call> {"name": "checkout", "arguments": {}} </tool_call>')
    ('checkout', {})
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

CATALOGUE: dict[str, tuple[str, float]] = {
    item_id: (item_id.replace("-", " "), price)
    for item_id, price in [
        ("red-shirt", 19.90), ("blue-jeans", 49.00), ("running-shoes", 89.00), ("wool-scarf", 25.00),
        ("leather-belt", 35.00), ("rain-jacket", 79.00), ("cotton-socks", 9.50), ("summer-hat", 22.00),
        ("denim-skirt", 39.00), ("winter-gloves", 18.00), ("silk-tie", 29.00), ("canvas-bag", 15.00),
        ("green-shirt", 19.90), ("wool-socks", 12.00),
    ]
}
"""The shop's items: item id -> (name, price). An item's id is its name with hyphens."""

TOOLS = ("search_products", "view_item", "add_to_cart", "checkout")


def item_id_of(name: str) -> str:
    """The id of the item called ``name`` (the reward compares ids).

    Example:
        >>> item_id_of("Red Shirt")
        'red-shirt'
    """
    return "-".join(name.lower().split())


class ToolTimeout(Exception):
    """The environment did not answer a tool call in time; the message names the tool."""


def failure_cause(error: BaseException) -> str:
    """What broke, as the monitoring reads it from ``metadata["shopsim_failure_cause"]``: type and message.

    Example:
        >>> failure_cause(ToolTimeout("search_products"))
        'ToolTimeout: search_products'
    """
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class ShopSettings:
    """How the shop behaves, from the ``shop_agent_*`` keys of slime's ``--custom-config-path`` YAML.

    ``failure_rate``: the chance that a call of ``failing_tool`` raises :class:`ToolTimeout`, drawn from
    ``(seed, episode, call number)`` so a run injects the same failures again; ``tool_seconds``: the time
    every tool call takes (a slow environment); ``slow_tool`` takes ``slow_seconds`` more (one slow tool);
    ``max_turns``: the model's turns in an episode at most.

    Example:
        >>> from types import SimpleNamespace as Args
        >>> ShopSettings.from_args(Args(shop_agent_failure_rate=0.2)).failure_rate
        0.2
        >>> ShopSettings.from_args(Args(shop_agent_failing_tool="pay"))
        Traceback (most recent call last):
        ...
        ValueError: shop_agent_failing_tool must be one of search_products, view_item, add_to_cart, checkout; got 'pay'
    """

    failure_rate: float = 0.0
    failing_tool: str = "search_products"
    seed: int = 0
    tool_seconds: float = 0.0
    max_turns: int = 8
    slow_tool: str = "view_item"
    slow_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"shop_agent_failure_rate must be in [0, 1]; got {self.failure_rate!r}")
        if self.failing_tool not in TOOLS:
            raise ValueError(f"shop_agent_failing_tool must be one of {', '.join(TOOLS)}; got {self.failing_tool!r}")
        if not self.tool_seconds >= 0.0:
            raise ValueError(f"shop_agent_tool_seconds must be >= 0; got {self.tool_seconds!r}")
        if self.slow_tool not in TOOLS:
            raise ValueError(f"shop_agent_slow_tool must be one of {', '.join(TOOLS)}; got {self.slow_tool!r}")
        if not self.slow_seconds >= 0.0:
            raise ValueError(f"shop_agent_slow_seconds must be >= 0; got {self.slow_seconds!r}")
        if self.max_turns < 1:
            raise ValueError(f"shop_agent_max_turns must be >= 1; got {self.max_turns!r}")

    @classmethod
    def from_args(cls, args: Any) -> "ShopSettings":
        """The settings slime's ``args`` carries (every key optional; the defaults above)."""
        return cls(**{name: getattr(args, f"shop_agent_{name}")
                      for name in cls.__dataclass_fields__ if hasattr(args, f"shop_agent_{name}")})

    def seconds_of(self, tool: str) -> float:
        """The seconds a call of ``tool`` takes.

        Example:
            >>> settings = ShopSettings(tool_seconds=0.1, slow_seconds=0.5)
            >>> settings.seconds_of("view_item"), settings.seconds_of("checkout")
            (0.6, 0.1)
        """
        return self.tool_seconds + (self.slow_seconds if tool == self.slow_tool else 0.0)

    def fails(self, tool: str, episode: str, call: int) -> bool:
        """Whether the ``call``-th tool call (from 0) of ``episode``, a call of ``tool``, is an injected failure.

        Example:
            >>> settings = ShopSettings(failure_rate=0.5, seed=1)
            >>> settings.fails("search_products", "p00#3", 0) == settings.fails("search_products", "p00#3", 0)
            True
            >>> settings.fails("checkout", "p00#3", 0)  # only the failing tool fails
            False
        """
        if tool != self.failing_tool or self.failure_rate == 0.0:
            return False
        return random.Random(f"{self.seed}:{episode}:{call}").random() < self.failure_rate


@dataclass
class Shop:
    """One episode's shop: the catalogue, its cart and its order; ``episode`` names it for the failure draws."""

    settings: ShopSettings
    episode: str
    cart: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    calls: int = 0

    def call(self, tool: str, arguments: dict) -> str:
        """Run one tool call and return what the model sees; raises :class:`ToolTimeout` when one is injected."""
        return self.run(tool, arguments)[0]

    def run(self, tool: str, arguments: dict) -> tuple[str, str | None]:
        """Run one tool call: what the model sees, and the model's mistake in it (None: none); raises
        :class:`ToolTimeout` when one is injected."""
        call, self.calls = self.calls, self.calls + 1
        if self.settings.fails(tool, self.episode, call):
            raise ToolTimeout(tool)
        if tool not in TOOLS:
            return f"error: no tool {tool!r}; the tools are {', '.join(TOOLS)}", model_mistake(tool, arguments)
        try:
            return getattr(self, tool)(**arguments), model_mistake(tool, arguments)
        except TypeError as error:  # the model's arguments do not fit the tool: its mistake, an answer
            return f"error: {error}", f"BadArguments: {tool}"

    def search_products(self, query: str) -> str:
        words = str(query).lower().split()
        found = [f"{item_id}: {name}, {price:.2f}" for item_id, (name, price) in CATALOGUE.items()
                 if words and all(word in name.split() for word in words)]
        return "\n".join(found) or f"no item matches {query!r}"

    def view_item(self, item_id: str) -> str:
        if item_id not in CATALOGUE:
            return f"no item {item_id!r}"
        name, price = CATALOGUE[item_id]
        return f"{item_id}: {name}, {price:.2f}, in stock"

    def add_to_cart(self, item_id: str) -> str:
        if item_id not in CATALOGUE:
            return f"no item {item_id!r}"
        self.cart.append(item_id)
        return f"added {item_id}; cart: {', '.join(self.cart)}"

    def checkout(self) -> str:
        if not self.cart:
            return "the cart is empty"
        self.order, self.cart = self.cart, []
        return f"order placed: {', '.join(self.order)}"


def model_mistake(tool: str, arguments: dict) -> str | None:
    """The model's mistake in a call of ``tool`` (an unknown tool, an item id not in the catalogue), or None.

    Example:
        >>> model_mistake("view_item", {"item_id": "red-shirt"}), model_mistake("view_item", {"item_id": "x"})
        (None, 'UnknownItem: x')
        >>> model_mistake("pay", {}), model_mistake("", {})
        ('UnknownTool: pay', 'UnknownTool: (malformed call)')
    """
    if tool not in TOOLS:
        return f"UnknownTool: {tool or '(malformed call)'}"
    item = arguments.get("item_id")
    if tool in ("view_item", "add_to_cart") and isinstance(item, str) and item not in CATALOGUE:
        return f"UnknownItem: {item}"
    return None


TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*\})\s*</tool_call>", re.DOTALL)


def parse_tool_call(text: str) -> tuple[str, dict] | None:
    """The model's tool call in ``text`` (``<tool_call> {"name": ..., "arguments": {...}} </tool_call>``),
    or None when it answered without one (its final answer). A malformed call is a call of no tool.

    Example:
        >>> parse_tool_call("I bought it.") is None
        True
        >>> parse_tool_call("<tool_call> {oops} </tool_call>")
        ('', {})
    """
    match = TOOL_CALL.search(text)
    if match is None:
        return None
    try:
        call = json.loads(match.group(1))
        return str(call["name"]), dict(call.get("arguments") or {})
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", {}
