"""Prompt prefixes whose keys and values are kept in the arena, so that a segment starting with one is not prefilled
from its first token: every segment of a translation prompt starts with the same instruction ("Translate the
following segment into German, without additional explanation." in the chat template), often as many tokens as a
short line of a document itself, and a position's keys and values depend only on the tokens up to it.

A request names how many of its leading tokens are such a prefix (`Request.prefix_tokens`, set by the translation
layer for its plain prompts). The first segment to prefill past a prefix has its rows copied into a range of the
arena kept for it (taken from the arena's end, out of the segments' way); a later segment with the same prefix, and
adapter, gets those rows copied into its own range before its first prefill step and is prefilled from the prefix's
end (the scheduler holds back one step the newcomers that share a prefix the step is keeping). The oldest-used
prefixes are given up when a segment would not fit beside them, or when more than MAX_PREFIXES are kept. The
copies themselves are the runner's (`KVArena.copy`), ordered on the device with the steps around them.

Pure bookkeeping (no torch), tested without a model; only the engine thread uses it.
"""

from __future__ import annotations

from collections import OrderedDict

from .allocator import RangeAllocator
from .sequence import Sequence

# Shorter prefixes are prefilled: a copy saves little there.
MIN_PREFIX_TOKENS = 8
# Prefixes kept at most (a translation server's are one a target language and prompt kind).
MAX_PREFIXES = 64

# An arena copy: (first source row, first destination row, rows).
Copy = tuple[int, int, int]


class Prefixes:
    def __init__(self, allocator: RangeAllocator, enabled: bool = True):
        self.allocator = allocator
        self.enabled = enabled
        self._kept: OrderedDict[tuple, int] = OrderedDict()  # key -> first arena row, least recently used first
        # Plain integers, read by other threads for the engine's snapshot (iterating _kept there could race).
        self.kept_tokens = 0
        self.hits = 0
        self.tokens_reused = 0

    def __len__(self) -> int:
        return len(self._kept)

    @staticmethod
    def key(seq: Sequence) -> tuple | None:
        n = len(seq.prefix)
        # At least the prompt's last two tokens are prefilled: a segment decodes only after a prefill step sampled it.
        if n < MIN_PREFIX_TOKENS or n > len(seq.prompt_ids) - 2:
            return None
        return (seq.adapter, seq.prefix)

    def reuse(self, seq: Sequence) -> Copy | None:
        """A newcomer about to be prefilled into its range: the copy of its prefix's rows into it where that prefix
        is kept (its first chunk then starts at the prefix's end)."""
        key = self.key(seq) if self.enabled else None
        if key is None or key not in self._kept:
            return None
        start = self._kept[key]
        self._kept.move_to_end(key)
        length = len(key[1])
        self.hits += 1
        self.tokens_reused += length
        return (start, seq.kv_start, length)

    def keep(self, seq: Sequence, prefilled_to: int) -> Copy | None:
        """A segment whose prefill reaches `prefilled_to` in this step: the copy of its prefix's rows into a range
        of their own, where that prefix is not kept yet, is complete after this step, and finds room."""
        key = self.key(seq) if self.enabled else None
        if key is None or key in self._kept or seq.num_cached >= len(key[1]) or prefilled_to < len(key[1]):
            return None
        length = len(key[1])
        if len(self._kept) >= MAX_PREFIXES:
            self._give_up_oldest()
        start = self.allocator.allocate(length, from_end=True)
        if start is None:
            return None
        self._kept[key] = start
        self.kept_tokens += length
        return (seq.kv_start, start, length)

    def make_room(self, tokens: int) -> bool:
        """Give up the oldest-used prefixes until a free range of `tokens` exists; whether one does."""
        while self.allocator.largest_free < tokens and self._kept:
            self._give_up_oldest()
        return self.allocator.largest_free >= tokens

    def forget(self, saves: list[Copy]) -> None:
        """Prefixes whose copies a failed step may not have made are no longer kept."""
        starts = {dst for _, dst, _ in saves}
        for key in [key for key, start in self._kept.items() if start in starts]:
            self._free(key, self._kept.pop(key))

    def _give_up_oldest(self) -> None:
        self._free(*self._kept.popitem(last=False))

    def _free(self, key: tuple, start: int) -> None:
        self.allocator.free(start, len(key[1]))
        self.kept_tokens -= len(key[1])
