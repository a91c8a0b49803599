"""LogSegments: the ordered segments of one partition, as one object (Kafka's LogSegments).

Owns the order and the lookup by offset, so nobody keeps a second list beside the segments:
- invariant: base offsets strictly increase; the last segment is the active one (the only one
  appended to); the base offsets searched by `floor` are always those of the segments held;
- `floor(offset)` is the segment that would hold `offset` (the first one when the offset is below
  every base), `from_offset(offset)` it and every later one, in order.
Never opens, reads or deletes files: PartitionLog does that with the segments it gets from here.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Iterator, Sequence, overload

from broker.log.segment import LogSegment


class LogSegments(Sequence[LogSegment]):
    """Segments in base-offset order, indexed like a list (read-only; change through the methods)."""

    def __init__(self) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    @overload
    def __getitem__(self, i: int) -> LogSegment: ...

    @overload
    def __getitem__(self, i: slice) -> list[LogSegment]: ...

    def __getitem__(self, i: int | slice) -> LogSegment | list[LogSegment]:
        return self._segments[i]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    def _floor_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def floor(self, offset: int) -> LogSegment:
        return self._segments[self._floor_index(offset)]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment that would hold `offset` and every later one."""
        return self._segments[self._floor_index(offset):]

    def append(self, seg: LogSegment) -> None:
        if self._bases and seg.base_offset <= self._bases[-1]:
            raise ValueError(f"segment {seg.base_offset} does not follow segment {self._bases[-1]}")
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def pop_first(self) -> LogSegment:
        self._bases.pop(0)
        return self._segments.pop(0)

    def pop_last(self) -> LogSegment:
        self._bases.pop()
        return self._segments.pop()

    def replace(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap the consecutive segments `old` for `new`, which takes the first one's place and base offset."""
        i = self._segments.index(old[0])
        if self._segments[i:i + len(old)] != old or new.base_offset != old[0].base_offset:
            raise ValueError("segments to replace must be consecutive and keep the first base offset")
        self._segments[i:i + len(old)] = [new]
        self._bases[i:i + len(old)] = [new.base_offset]

    def size_in_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)
