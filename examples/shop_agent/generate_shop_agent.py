"""A multi-turn shopping agent for slime: a custom generate function and its reward.

Each rollout is one episode: the model asks the shop's tools (search, view an item, add to cart, check
out; ``shop_tools.py``) until it answers without a tool call or runs out of turns. Every turn is one
request to the engine over the episode's tokens so far; the model's tokens are appended as trainable
(``loss_mask`` 1, with their log-probabilities), each tool's output as an observation (``loss_mask`` 0).
What the monitoring reads of an episode (docs §3.9, "Monitoring an agent run"):

- ``metadata["round_number"]``: the model's turns (slime's own key; ``--log-multi-turn`` logs it);
- ``non_generation_time``: the seconds spent in tools;
- an environment failure (an exception in a tool, e.g. an injected :class:`shop_tools.ToolTimeout`):
  status ``aborted`` and ``metadata["shopsim_failure_cause"] = "ToolTimeout: search_products"``; the
  filter drops the group as technical and counts it by that cause;
- slime's own abort at the end of a step (the engine answers ``finish_reason`` abort): status
  ``aborted`` and no cause; the turn's partial output is kept (those tokens were generated).

Run it (``examples/shop_agent`` on ``PYTHONPATH``; prompts are the task's text, labels the item's name)::

    --custom-generate-function-path generate_shop_agent.generate
    --custom-rm-path generate_shop_agent.reward
    --rollout-max-context-len 4096

and set the shop in the ``--custom-config-path`` YAML: ``shop_agent_failure_rate``,
``shop_agent_failing_tool``, ``shop_agent_seed``, ``shop_agent_tool_seconds``, ``shop_agent_max_turns``
(:class:`shop_tools.ShopSettings`).
"""

from __future__ import annotations

import asyncio
import time

from slime.rollout.sglang_rollout import GenerateState
from slime.utils.http_utils import post
from slime.utils.types import Sample

from shop_tools import CATALOGUE, TOOLS, Shop, ShopSettings, failure_cause, item_id_of, parse_tool_call

FAILURE_CAUSE_KEY = "shopsim_failure_cause"
"""Where the monitoring reads an environment failure's cause (a str, or the exception itself)."""

SYSTEM = (
    "<|im_start|>system\nYou are a shopping assistant. Tools: " + ", ".join(TOOLS) + ". Call one as "
    '<tool_call> {"name": ..., "arguments": {...}} </tool_call>; answer without a call when done.<|im_end|>\n'
)


def render_prompt(task: str) -> str:
    """The episode's first input: the system message and the user's task (replace with your chat template)."""
    return f"{SYSTEM}<|im_start|>user\n {task} <|im_end|>\n<|im_start|>assistant\n"


def render_observation(result: str) -> str:
    """A tool's output as the model reads it, closing its turn and opening the next."""
    return f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


async def generate(args, sample: Sample, sampling_params: dict) -> Sample:
    """Run one shopping episode for ``sample`` (slime's ``--custom-generate-function-path``)."""
    state = GenerateState(args)
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    settings = ShopSettings.from_args(args)
    shop = Shop(settings, episode=f"{sample.prompt}#{sample.index}")

    # a retried sample starts afresh
    sample.tokens = state.tokenizer(render_prompt(str(sample.prompt)), add_special_tokens=False)["input_ids"]
    sample.response, sample.response_length, sample.loss_mask = "", 0, []
    sample.rollout_log_probs = None
    sample.non_generation_time = 0.0
    sample.metadata["round_number"] = 0

    for turn in range(settings.max_turns):
        budget = (args.rollout_max_context_len or 1 << 30) - len(sample.tokens)
        if budget <= 0:
            sample.status = Sample.Status.TRUNCATED
            break
        payload = {
            "input_ids": sample.tokens,
            "sampling_params": {**sampling_params, "max_new_tokens": min(sampling_params["max_new_tokens"], budget)},
            "return_logprob": True,
        }
        output = await post(url, payload)
        meta = output["meta_info"]
        tokens = [token for _, token, _ in meta.get("output_token_logprobs", [])]
        log_probs = [log_prob for log_prob, _, _ in meta.get("output_token_logprobs", [])]
        text = state.tokenizer.decode(tokens)
        # sets the status from finish_reason: completed, truncated (length) or aborted
        sample.append_response_tokens(args, tokens=tokens, log_probs=log_probs, trainable=True, meta_info=meta,
                                      text=text)
        sample.metadata["round_number"] = turn + 1
        if meta["finish_reason"]["type"] != "stop":
            return sample  # slime's abort of the step (no cause: not the environment's failure) or the length limit

        call = parse_tool_call(text)
        if call is None:
            break  # the model's final answer
        if turn == settings.max_turns - 1:
            sample.status = Sample.Status.TRUNCATED  # out of turns before the tool ran
            break
        started = time.monotonic()
        try:
            await asyncio.sleep(settings.tool_seconds)
            result = shop.call(*call)
        except Exception as error:  # the environment failed, not the model: a technical failure with its cause
            sample.status = Sample.Status.ABORTED
            sample.metadata[FAILURE_CAUSE_KEY] = failure_cause(error)
            return sample
        finally:
            sample.non_generation_time += time.monotonic() - started
        observation = render_observation(result)
        sample.append_response_tokens(args, tokens=state.tokenizer(observation, add_special_tokens=False)["input_ids"],
                                      trainable=False, text=observation)

    sample.metadata["shop_order"] = shop.order
    return sample


async def reward(args, sample: Sample, **kwargs) -> float:
    """1.0 when the episode checked out exactly the item of its label, else 0.0 (slime's ``--custom-rm-path``).

    Example:
        >>> from types import SimpleNamespace as S
        >>> asyncio.run(reward(None, S(label="red shirt", metadata={"shop_order": ["red-shirt"]})))
        1.0
    """
    wanted = item_id_of(str(sample.label))
    return 1.0 if wanted in CATALOGUE and sample.metadata.get("shop_order") == [wanted] else 0.0
