"""Space in the KV arena: every segment in flight holds one contiguous range of token rows, sized when it is
admitted (prompt + output budget), so attention reads its keys as one span (flash attention's varlen kernel takes a
start and a length per segment). First fit; a freed range merges with its free neighbours.

Pure bookkeeping (no torch), tested without a model.
"""

from __future__ import annotations

import bisect


class RangeAllocator:
    def __init__(self, capacity_tokens: int, reserved_tokens: int = 0):
        if capacity_tokens <= reserved_tokens:
            raise ValueError(f"an arena of {capacity_tokens} tokens has no room beyond its {reserved_tokens} reserved")
        self.capacity_tokens = capacity_tokens
        self.reserved_tokens = reserved_tokens
        # Free ranges as parallel sorted lists of starts and lengths.
        self._starts: list[int] = [reserved_tokens]
        self._lengths: list[int] = [capacity_tokens - reserved_tokens]

    @property
    def free_tokens(self) -> int:
        return sum(self._lengths)

    @property
    def used_tokens(self) -> int:
        return self.capacity_tokens - self.reserved_tokens - self.free_tokens

    @property
    def largest_free(self) -> int:
        return max(self._lengths, default=0)

    def allocate(self, size: int, from_end: bool = False) -> int | None:
        """The start of a free range of `size` tokens, or None when no free range is that long. `from_end`: the
        last tokens of the last free range that fits (ranges kept long, away from the segments' first fits)."""
        if size <= 0:
            raise ValueError(f"cannot allocate {size} tokens")
        if from_end:
            for i in reversed(range(len(self._lengths))):
                if self._lengths[i] >= size:
                    self._lengths[i] -= size
                    start = self._starts[i] + self._lengths[i]
                    if not self._lengths[i]:
                        del self._starts[i], self._lengths[i]
                    return start
            return None
        for i, length in enumerate(self._lengths):
            if length >= size:
                start = self._starts[i]
                if length == size:
                    del self._starts[i], self._lengths[i]
                else:
                    self._starts[i] += size
                    self._lengths[i] -= size
                return start
        return None

    def free(self, start: int, size: int) -> None:
        i = bisect.bisect_left(self._starts, start)
        if (
            (i < len(self._starts) and self._starts[i] < start + size)
            or (i > 0 and self._starts[i - 1] + self._lengths[i - 1] > start)
            or start < self.reserved_tokens
        ):
            raise ValueError(f"range {start}+{size} overlaps free or reserved space: freed twice?")
        merge_left = i > 0 and self._starts[i - 1] + self._lengths[i - 1] == start
        merge_right = i < len(self._starts) and self._starts[i] == start + size
        if merge_left and merge_right:
            self._lengths[i - 1] += size + self._lengths[i]
            del self._starts[i], self._lengths[i]
        elif merge_left:
            self._lengths[i - 1] += size
        elif merge_right:
            self._starts[i] = start
            self._lengths[i] += size
        else:
            self._starts.insert(i, start)
            self._lengths.insert(i, size)
