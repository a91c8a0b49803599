"""The lag chart's memory (pylog/console/lag_history.py): bounded per group and in groups, and the sampler that
keeps sampling through failures."""
from __future__ import annotations

import threading
import time

import pytest

from pylog.console.lag_history import LagHistory, LagSampler


def test_each_group_keeps_only_its_last_points() -> None:
    history = LagHistory(max_points=3)
    for i in range(5):
        history.record(1000 * i, {"a": 10 - i, "b": None})
    assert history.points("a") == [(2000, 8), (3000, 7), (4000, 6)]
    assert history.points("b") == [(2000, None), (3000, None), (4000, None)]
    assert history.points("never") == []


def test_the_groups_sampled_longest_ago_are_dropped_first() -> None:
    history = LagHistory(max_points=10, max_groups=2)
    history.record(1, {"a": 1, "b": 1})
    history.record(2, {"a": 2})                # a sampled again: b is now the oldest
    history.record(3, {"c": 3})
    assert history.groups() == ["a", "c"] and history.points("b") == []
    with pytest.raises(ValueError):
        LagHistory(max_points=0)


def test_the_sampler_records_every_interval_and_survives_a_failed_sample() -> None:
    history = LagHistory(max_points=100)
    calls = []
    enough = threading.Event()

    def sample() -> dict[str, int | None]:
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise RuntimeError("broker away")
        if len(calls) >= 4:
            enough.set()
        return {"g": 100 - len(calls)}

    sampler = LagSampler(history, sample, 0.05).start()
    try:
        assert enough.wait(5)
    finally:
        sampler.stop()
    lags = [lag for _, lag in history.points("g")]
    assert lags[:3] == [99, 97, 96]            # the second sample failed and left no point
    assert all(b - a >= 0.04 for a, b in zip(calls, calls[1:]))
