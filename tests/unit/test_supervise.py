"""jobs/supervise.py: each batch that ran reported once, from Spark's last progress where it suffices."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from jobs.supervise import supervise


def _progress(batch: int, ran: bool) -> Any:
    return SimpleNamespace(batchId=batch, durationMs={"addBatch": 5, "triggerExecution": 9} if ran else
                           {"triggerExecution": 1})


class Query:
    """A query whose progress advances one step per poll: `steps` lists the reports that arrive by each poll."""

    def __init__(self, steps: list[list[Any]]) -> None:
        self.steps, self.polls, self.reports, self.recent_calls = steps, 0, [], 0

    @property
    def isActive(self) -> bool:
        return self.polls < len(self.steps)

    def awaitTermination(self, timeout: float) -> None:
        self.reports += self.steps[self.polls]
        self.polls += 1

    @property
    def lastProgress(self) -> Any:
        return self.reports[-1] if self.reports else None

    @property
    def recentProgress(self) -> list[Any]:
        self.recent_calls += 1
        return list(self.reports)

    def exception(self) -> None:
        return None


def test_every_batch_that_ran_is_reported_once_and_idle_polls_ask_only_for_the_last_progress() -> None:
    steps = [[], [_progress(0, False)], [_progress(0, True)], [], [_progress(1, False)], [],
             [_progress(1, True), _progress(2, True), _progress(3, False)],     # two batches between polls
             [], [], [_progress(3, True)]]
    query = Query(steps)
    seen: list[int] = []
    assert supervise(query, lambda p: seen.append(p.batchId)) == 0
    assert seen == [0, 1, 2, 3]
    assert query.recent_calls == 3 + 1        # the polls after batches 0, 1-2 and 3 ran, and the final look
