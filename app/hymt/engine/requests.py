"""What the token engine takes and gives, without torch or text: a Request (one segment's token ids, its output
budget and decoding settings, and who asked, for the fair order), the Outputs it posts back keyed by the request's
id, and a Snapshot of its figures at one moment.

The scheduling class: interactive work (a person waiting on a sentence) goes ahead of batch work (documents, long
texts), which keeps a minimum share of the rows so that it always advances.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import HymtError
from .sampling_params import Sampling

if TYPE_CHECKING:
    from .timings import Histogram


class Priority(StrEnum):
    INTERACTIVE = "interactive"
    BATCH = "batch"


@dataclass(frozen=True)
class Request:
    """One segment to generate for. `client` (an API key's or an address's name) and `group` (the translation
    request it belongs to) are turns in the fair order: clients take turns within a class, and one client's
    requests take turns among themselves."""

    id: int
    prompt_ids: list[int]
    max_new_tokens: int
    sampling: Sampling = Sampling()
    min_new_tokens: int = 0
    adapter: str | None = None
    priority: Priority = Priority.INTERACTIVE
    client: str = ""
    group: int = 0
    stream: bool = False  # every token posted as it is generated; otherwise all of them once it ends
    prefix_tokens: int = 0  # leading prompt tokens that other requests share (their KV kept: engine/prefixes.py)

    @property
    def kv_tokens(self) -> int:
        """The arena range it needs: the prompt and the whole output budget."""
        return len(self.prompt_ids) + self.max_new_tokens


@dataclass(frozen=True)
class Output:
    """What a request produced since its last output: new token ids, and whether it has ended (with an error when
    it could not be generated). A request that ends posts no more outputs."""

    id: int
    token_ids: tuple[int, ...] = ()
    finished: bool = False
    error: HymtError | None = None


@dataclass(frozen=True)
class Snapshot:
    """The engine's figures at one moment (each read once; they may be a step apart from one another)."""

    queue_depth: int  # segments waiting, both classes
    waiting: dict[str, int]  # by class
    running: dict[str, int]  # rows in flight, by class
    in_flight: int
    max_in_flight: int
    kv_used_tokens: int
    tokens_in: int
    prefix_tokens_reused: int  # prompt tokens not prefilled: copied from a kept prefix
    tokens_out: int
    tokens_out_by_class: dict[str, int]
    segments: int  # finished
    steps: dict[str, int]  # by kind: prefill, decode
    step_s: dict[str, float]
    max_in_flight_seen: int
    oom_events: int
    preemptions: int
    last_oom_at: float | None  # time.monotonic() of the latest out-of-memory
    admitted: int  # requests, counted at add
    refused: int
    expected_wait_s: float  # of the latest interactive request, admitted or not
    max_wait_s: float
    tokens_per_s: float  # measured under load (the warm-up's figure before any)
    timings: dict[tuple[str, str], Histogram]  # segments' times by (phase, class): engine/timings.py
