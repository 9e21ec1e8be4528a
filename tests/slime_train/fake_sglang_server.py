"""A fake SGLang engine and router on 127.0.0.1, answering what slime calls in rollout-only mode.

slime's driver (``train.py --rollout-external-engine-addrs HOST:PORT --sglang-router-ip HOST
--sglang-router-port PORT``) registers an external engine instead of launching one. This one
process plays both the engine and the router:

- ``GET /server_info``: the engine's settings slime checks (``enable_memory_saver`` false, tp 1);
- ``POST /workers`` (an engine registering) and ``GET /workers`` (the abort path lists them);
- ``POST /generate``: answers every request with a few tokens after a per-prompt delay, so the
  groups of one wave finish in a fixed order (prompts with a lower key finish first);
- ``POST /abort_request``: every request in flight answers at once with ``finish_reason`` abort and the
  tokens it had made so far (a request makes its tokens evenly over its delay, as an engine does);
- ``GET /v1/loads``: requests in flight (slime polls it until the engine is idle after an abort);
- ``GET /health``, ``GET /health_generate``, ``GET /flush_cache``: 200.

Which prompt a request is for is read back from its ``input_ids``: the server tokenizes every prompt
of the dataset with the same tokenizer and keys it by a metadata column (``--key-column``). What it
received is reported by ``GET /stats`` and, one JSON line per request, in ``--log-file``::

    {"requests": {"p03": 8, ...}, "answered": {...}, "aborted": {...}, "unknown": 0, "in_flight": 0}

Each log line also says how many ``/abort_request`` calls the server had answered when the request
arrived (``aborts_before``): slime aborts its engines once at the end of every rollout step, after
which it sends no request of that step, so requests with the same ``aborts_before`` belong to one step.

Rewards are not decided here: they come from the dataset's metadata (``harness_reward.py``).

    python fake_sglang_server.py --port P --tokenizer DIR --dataset data.jsonl [--key-column prompt_id]
        [--log-file requests.jsonl] [--base-delay 0.05] [--delay-step 0.1] [--script script.json]
        [--long-tail 6 --seconds-per-token 0.02] [--agent retool|shop]

``--agent retool|shop`` answers multi-turn episodes instead (``agent_dialects.py``): a request that
continues an episode (its ``input_ids`` start with the episode's last input and answer) gets the
episode's next turn, a tool call or the final answer in the dialect the generate function parses; any
other request starts an episode of the prompt its ``input_ids`` hold (a chat template may wrap it).
Each turn takes the prompt's delay. An episode belongs to the rollout step its first request came in
(``episode_step``: slime's aborts before it), however late its last turn: slime waits for the step's
episodes after its abort, and one that was in a tool then still asks the engine.

Every log line holds the exact tokens returned (``output_ids``; for an aborted request the partial
tokens), the request's input length (``input_tokens``) and, with ``--agent``, the ``episode`` (a serial
number), its ``turn`` (from 0) and ``episode_step``.

``--script`` (JSON, key -> {"delay": s, "tokens": n, "finish": "stop"|"length"}) overrides the
defaults per prompt. ``--long-tail MEDIAN`` gives every request its own long-tailed length instead: a
lognormal draw (median MEDIAN tokens, shape 1; part of it shared by the prompt's group in the step, as hard
prompts write long answers), reproducible from the prompt key, the step and the request's ordinal for that
prompt, and a delay that follows it (``--base-delay`` + tokens × ``--seconds-per-token``): long answers are
the slow ones, as on a real engine, so slime's abort cuts them off. The server prints
``READY <port>`` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from agent_dialects import ANSWER_WORDS, DIALECTS, plan  # build_tokenizer.py puts their words in the vocabulary


@dataclass
class Episode:
    """One multi-turn episode as the engine sees it: its prompt, its plan and where it stands."""

    serial: int
    key: str
    step: int  # slime's aborts before its first request: the rollout step it belongs to
    turns: list[list[int]]  # the token ids of every planned turn
    context: tuple[int, ...] = ()  # the last input and answer: the next request starts with it
    turn: int = 0  # the next turn
    busy: bool = False  # a request of it is in flight
    ended: bool = False  # answered its last turn, or aborted

    def continued_by(self, ids: tuple[int, ...]) -> bool:
        return not (self.busy or self.ended) and len(ids) >= len(self.context) and ids[:len(self.context)] == self.context


class FakeEngine:
    """State of the fake engine: prompt keys by token ids, requests in flight, counters."""

    def __init__(self, tokenizer_dir: str, dataset: str, key_column: str, script: dict, base_delay: float,
                 delay_step: float, log_file: str | None, host: str, port: int, long_tail: float | None = None,
                 seconds_per_token: float = 0.02, agent: str | None = None):
        from tokenizers import Tokenizer

        self.base_delay, self.long_tail, self.seconds_per_token = base_delay, long_tail, seconds_per_token
        self.agent = agent

        self.tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
        self.answer_ids = [self.tokenizer.token_to_id(word) for word in ANSWER_WORDS]
        rows = [json.loads(line) for line in Path(dataset).read_text().splitlines() if line.strip()]
        self.rows = rows
        self.key_by_ids: dict[tuple[int, ...], str] = {}
        self.row_by_key: dict[str, dict] = {}
        for row in rows:
            ids = tuple(self.tokenizer.encode(row["prompt"], add_special_tokens=False).ids)
            key = str((row.get("metadata") or {}).get(key_column))
            self.key_by_ids[ids] = key
            self.row_by_key[key] = row
        self.episodes: dict[str, list[Episode]] = {}  # by prompt key
        self.episode_count = 0
        self.newest: Episode | None = None
        keys = sorted(set(self.key_by_ids.values()))
        self.settings = {
            key: {"delay": base_delay + delay_step * rank, "tokens": 2 + rank % 4, "finish": "stop"}
            for rank, key in enumerate(keys)
        }
        for key, override in (script or {}).items():
            self.settings.setdefault(key, {"delay": base_delay, "tokens": 2, "finish": "stop"}).update(override)
        self.in_flight: set[asyncio.Event] = set()
        self.requests: Counter = Counter()
        self.answered: Counter = Counter()
        self.aborted: Counter = Counter()
        self.unknown = 0
        self.abort_calls = 0
        self.workers: list[dict] = []
        self.url = f"http://{host}:{port}"
        self.log = open(log_file, "a", buffering=1) if log_file else None

    def long_tail_setting(self, key: str, ordinal: int) -> dict:
        """The ``ordinal``-th request for ``key`` under ``--long-tail``: a lognormal length, a delay that follows it.

        The log-length is a draw for the prompt in this rollout step (slime's aborts so far: hard prompts write
        long answers, all of their group's rollouts alike) plus one for the answer, of shapes 0.8 and 0.6 (1 in all).
        """
        prompt = random.Random(f"{key}@{self.abort_calls}").gauss(0.0, 1.0)
        answer = random.Random(f"{key}:{ordinal}").gauss(0.0, 1.0)
        tokens = max(1, round(self.long_tail * math.exp(0.8 * prompt + 0.6 * answer)))
        return {"delay": self.base_delay + tokens * self.seconds_per_token, "tokens": tokens, "finish": "stop"}

    def key_of(self, input_ids) -> str | None:
        return self.key_by_ids.get(tuple(int(i) for i in input_ids or []))

    def key_within(self, ids: tuple[int, ...]) -> str | None:
        """The prompt whose words are in ``ids`` (less its first and last: a template may glue them to its
        markers), or None."""
        for prompt_ids, key in self.key_by_ids.items():
            core = prompt_ids[1:-1] if len(prompt_ids) > 2 else prompt_ids
            if any(ids[start:start + len(core)] == core for start in range(len(ids) - len(core) + 1)):
                return key
        return None

    def episode_of(self, ids: tuple[int, ...]) -> Episode | None:
        """The episode ``ids`` continues, else a new one of the prompt it holds, else None (an unknown prompt).

        It continues an episode of the latest step whose context it starts with (the longest; the newest of
        equals: episodes with the same context are alike so far): an episode of an earlier step never goes
        on (slime waits for a step's episodes before the next step starts), as one its generate function
        ended without telling the engine (a tool failed) may look the same as a live one.
        """
        latest = self.newest.step if self.newest is not None else None
        open_ones = [episode for episodes in self.episodes.values() for episode in episodes
                     if episode.step == latest and episode.context and episode.continued_by(ids)]
        if open_ones:
            return max(open_ones, key=lambda episode: (len(episode.context), episode.serial))
        key = self.key_within(ids)
        if key is None:
            return None
        episodes = self.episodes.setdefault(key, [])
        words = plan(self.agent, self.row_by_key[key], self.rows, len(episodes))
        episode = Episode(self.episode_count, key, self.abort_calls,
                          [[self.tokenizer.token_to_id(word) for word in turn] for turn in words])
        self.episode_count += 1
        self.newest = episode
        episodes.append(episode)
        return episode

    def answer(self, key: str | None, episode: Episode | None) -> tuple[dict, list[int]]:
        """The request's delay and finish (its setting) and the tokens it answers with."""
        if key is None:
            return {"delay": 0.0, "tokens": 1, "finish": "stop"}, list(self.answer_ids[:1])
        if episode is not None:
            return dict(self.settings[key], finish="stop"), episode.turns[episode.turn]
        setting = (self.settings[key] if self.long_tail is None
                   else self.long_tail_setting(key, self.requests[key]))
        return setting, [self.answer_ids[i % len(self.answer_ids)] for i in range(int(setting["tokens"]))]

    @staticmethod
    async def make_tokens(n_tokens: int, delay: float, abort: asyncio.Event) -> int:
        """Make ``n_tokens`` evenly over ``delay`` seconds, one every ``delay / n_tokens``, as an engine decodes;
        the tokens made when ``abort`` is set. Each token's time bounds a wait on the event (the engine's model
        of decoding): no clock is read, the count is of the waits that ran out before the abort."""
        if n_tokens <= 0 or delay <= 0:  # nothing to wait for: every token at once
            return n_tokens
        for made in range(n_tokens):
            try:
                await asyncio.wait_for(abort.wait(), timeout=delay / n_tokens)
                return made
            except asyncio.TimeoutError:
                continue
        return n_tokens

    async def generate(self, request: web.Request) -> web.Response:
        payload = await request.json()
        ids = tuple(int(i) for i in payload.get("input_ids") or [])
        episode = self.episode_of(ids) if self.agent else None
        key = episode.key if episode is not None else (None if self.agent else self.key_of(ids))
        sampling = payload.get("sampling_params") or {}
        if key is None:
            self.unknown += 1
        else:
            self.requests[key] += 1
        setting, planned = self.answer(key, episode)
        max_new = int(sampling.get("max_new_tokens") or len(planned))
        n_tokens = min(len(planned), max_new)
        finish = setting["finish"] if n_tokens < max_new or setting["finish"] != "stop" else "length"
        if episode is not None:
            episode.busy = True

        aborts_before = self.abort_calls  # which rollout step the request belongs to (slime aborts once per step)
        abort = asyncio.Event()
        self.in_flight.add(abort)
        try:
            made = await self.make_tokens(n_tokens, float(setting["delay"]), abort)
        finally:
            self.in_flight.discard(abort)
        aborted = made < n_tokens or abort.is_set()
        if aborted:  # the tokens made before the abort, as SGLang returns them
            n_tokens, finish = made, "abort"
            self.aborted[key] += 1
        else:
            self.answered[key] += 1
        output = planned[:n_tokens]
        line = {"key": key, "finish": finish, "tokens": n_tokens, "aborts_before": aborts_before,
                "delay": float(setting["delay"]), "input_tokens": len(ids), "output_ids": output}
        if episode is not None:
            line.update(episode=episode.serial, turn=episode.turn, episode_step=episode.step)
            episode.busy, episode.context, episode.turn = False, ids + tuple(output), episode.turn + 1
            episode.ended = aborted or episode.turn == len(episode.turns)
        if self.log is not None:
            self.log.write(json.dumps(line) + "\n")
        meta = {
            "id": f"req-{sum(self.requests.values()) + self.unknown}",
            "finish_reason": {"type": finish},
            "prompt_tokens": len(ids),
            "completion_tokens": n_tokens,
            "cached_tokens": 0,
            "output_token_logprobs": [[-0.25, token, None] for token in output],
            "weight_version": "default",
        }
        return web.json_response({"text": self.tokenizer.decode(output), "meta_info": meta})

    async def abort_request(self, request: web.Request) -> web.Response:
        self.abort_calls += 1
        for event in list(self.in_flight):
            event.set()
        return web.json_response({"success": True})

    async def loads(self, request: web.Request) -> web.Response:
        n = len(self.in_flight)
        return web.json_response({"loads": [{"dp_rank": 0, "num_running_reqs": n, "num_waiting_reqs": 0,
                                             "num_total_reqs": n}]})

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response({"enable_memory_saver": False, "tp_size": 1, "pp_size": 1, "ep_size": 1,
                                  "dp_size": 1, "num_gpus": 1, "model_path": "fake", "weight_version": "default"})

    async def post_workers(self, request: web.Request) -> web.Response:
        body = await request.json()
        if all(worker["url"] != body.get("url") for worker in self.workers):
            self.workers.append({"id": f"worker-{len(self.workers)}", "url": body.get("url"),
                                 "worker_type": body.get("worker_type", "regular")})
        return web.json_response({"status": "ok"})

    async def get_workers(self, request: web.Request) -> web.Response:
        return web.json_response({"workers": self.workers or [{"id": "self", "url": self.url}]})

    async def ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": dict(self.requests), "answered": dict(self.answered),
                                  "aborted": {str(k): v for k, v in self.aborted.items()},
                                  "unknown": self.unknown, "in_flight": len(self.in_flight),
                                  "abort_calls": self.abort_calls, "workers": self.workers})


def make_app(engine: FakeEngine) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.add_routes([
        web.get("/server_info", engine.server_info), web.get("/get_server_info", engine.server_info),
        web.post("/workers", engine.post_workers), web.get("/workers", engine.get_workers),
        web.post("/generate", engine.generate), web.post("/abort_request", engine.abort_request),
        web.get("/v1/loads", engine.loads), web.get("/health", engine.ok), web.get("/health_generate", engine.ok),
        web.get("/flush_cache", engine.ok), web.get("/stats", engine.stats),
    ])
    return app


async def serve(options) -> None:
    script = json.loads(Path(options.script).read_text()) if options.script else {}
    engine = FakeEngine(options.tokenizer, options.dataset, options.key_column, script, options.base_delay,
                        options.delay_step, options.log_file, options.host, options.port,
                        long_tail=options.long_tail, seconds_per_token=options.seconds_per_token, agent=options.agent)
    runner = web.AppRunner(make_app(engine), access_log=None)
    await runner.setup()
    # slime opens many connections at once and retries on a refused one: a deep listen queue
    site = web.TCPSite(runner, options.host, options.port, backlog=4096)
    await site.start()
    print(f"READY {options.port}", flush=True)
    await asyncio.Event().wait()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokenizer", required=True, help="directory holding tokenizer.json")
    parser.add_argument("--dataset", required=True, help="the prompts file slime reads (jsonl)")
    parser.add_argument("--key-column", default="prompt_id", help="metadata column naming a prompt")
    parser.add_argument("--script", default=None)
    parser.add_argument("--log-file", default=None)
    parser.add_argument("--base-delay", type=float, default=0.05)
    parser.add_argument("--delay-step", type=float, default=0.1)
    parser.add_argument("--long-tail", type=float, default=None, metavar="MEDIAN",
                        help="each request a lognormal length of this median (shape 1), its delay following it")
    parser.add_argument("--seconds-per-token", type=float, default=0.02, help="with --long-tail: delay per token")
    parser.add_argument("--agent", choices=DIALECTS, default=None,
                        help="answer multi-turn episodes in this generate function's dialect (agent_dialects.py)")
    options = parser.parse_args(argv)
    if options.host != "127.0.0.1":
        parser.error(f"--host must be 127.0.0.1 (got {options.host!r}): the harness stays on loopback")
    asyncio.run(serve(options))


if __name__ == "__main__":
    main()
