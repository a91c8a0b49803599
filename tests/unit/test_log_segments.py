"""LogSegments keeps order and lookup by offset in one object (pure logic: segments stand in by base and size)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker.log.log_segments import LogSegments


@dataclass(eq=False)
class Seg:
    base_offset: int
    size: int = 10


def _segments(*bases: int) -> LogSegments:
    segs = LogSegments()
    for b in bases:
        segs.append(Seg(b))   # type: ignore[arg-type]
    return segs


def test_floor_and_from_offset_find_the_segment_holding_an_offset():
    segs = _segments(0, 100, 250)
    assert segs.floor(-5).base_offset == 0 and segs.floor(99).base_offset == 0
    assert segs.floor(100).base_offset == 100 and segs.floor(10**9).base_offset == 250
    assert [s.base_offset for s in segs.from_offset(120)] == [100, 250]
    assert segs.active.base_offset == 250 and segs.size_in_bytes() == 30


def test_order_is_kept_by_every_change():
    segs = _segments(0, 100, 250)
    with pytest.raises(ValueError, match="does not follow"):
        segs.append(Seg(250))   # type: ignore[arg-type]
    first, second = segs[0], segs[1]
    cleaned = Seg(0, 5)
    segs.replace([first, second], cleaned)   # type: ignore[list-item,arg-type]
    assert [s.base_offset for s in segs] == [0, 250] and segs.floor(200) is cleaned
    with pytest.raises(ValueError, match="consecutive"):
        segs.replace([segs[1]], Seg(7))   # type: ignore[arg-type]
    assert segs.pop_first() is cleaned and segs.floor(0).base_offset == 250
