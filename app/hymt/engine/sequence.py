"""A segment inside the engine: the request it was given, and its state as the scheduler and runner move it along
(waiting, running in a row with its KV range, finished) with what it has generated. Pure bookkeeping, no torch."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

from .requests import Request


class State(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    request: Request
    output_ids: list[int] = field(default_factory=list)
    state: State = State.WAITING
    arrival: int = 0
    # While admitted (running): its state row in the runner and the first arena row of its range; -1 otherwise.
    row: int = -1
    kv_start: int = -1
    num_cached: int = 0  # tokens whose keys and values are in the arena
    reused: int = 0  # of those, copied from a kept prefix before its first prefill chunk (which starts there)
    preemptions: int = 0
    posted: int = 0  # output tokens already posted back (a streaming request's)
    # Its times (time.monotonic(), engine/timings.py): posted (on the adding thread), first given a row, first token
    # sampled; and the tokens sampled, a stop token included.
    submitted: float = field(default_factory=time.monotonic)
    admitted_at: float = 0.0
    first_token_at: float = 0.0
    sampled: int = 0

    def __post_init__(self):
        # Read at every step for every row: plain attributes, not properties over the request.
        request = self.request
        self.id, self.prompt_ids, self.max_new_tokens = request.id, request.prompt_ids, request.max_new_tokens
        self.sampling, self.adapter, self.min_new_tokens = request.sampling, request.adapter, request.min_new_tokens
        self.priority = request.priority
        # The leading tokens it shares with other prompts (engine/prefixes.py keys them), sliced once here, on the
        # thread that adds it, not at each prefill step on the engine's.
        self.prefix = tuple(request.prompt_ids[: request.prefix_tokens])

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def kv_tokens(self) -> int:
        """The arena range it needs: the prompt and the whole output budget (the last token is never cached)."""
        return len(self.prompt_ids) + self.max_new_tokens

    @property
    def owed_tokens(self) -> int:
        """Output tokens it may still generate."""
        return self.max_new_tokens - len(self.output_ids)

    def token(self, position: int) -> int:
        n = len(self.prompt_ids)
        return self.prompt_ids[position] if position < n else self.output_ids[position - n]

    @property
    def needs_prefill(self) -> bool:
        return self.num_tokens - self.num_cached > 1
