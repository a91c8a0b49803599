"""`pylog job maintain`'s pure parts: which delta-spark errors are conflicts worth a retry, the retry loop,
and the offsets check that fails the job when maintenance would make an app re-read records."""
from __future__ import annotations

import pytest

from connectors.offset_txns import AppState
from jobs.errors import JobFailed
from jobs.maintain import is_conflict, lost_offsets, retried


@pytest.mark.parametrize("message, conflict", [
    ("An error occurred while calling o45.sql.\n: io.delta.exceptions.ConcurrentAppendException: Files were added "
     "to the root of the table by a concurrent update.", True),
    ("[DELTA_CONCURRENT_DELETE_READ] ConcurrentDeleteReadException: This transaction attempted to read one or more "
     "files that were deleted", True),
    ("io.delta.exceptions.MetadataChangedException: The metadata of the Delta table has been changed", True),
    ("[DELTA_PROTOCOL_CHANGED] ProtocolChangedException: The protocol version of the Delta table has been changed",
     True),
    ("requirement failed: Are you sure you would like to vacuum files with such a low retention period?", False),
    ("[DELTA_TABLE_NOT_FOUND] Delta table `/x` doesn't exist.", False),
])
def test_only_delta_spark_conflicts_count_as_conflicts(message, conflict):
    assert is_conflict(RuntimeError(message)) is conflict


def test_a_conflicting_step_is_retried_and_then_given_up_with_the_cause():
    calls = []

    def step() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("io.delta.exceptions.ConcurrentAppendException: concurrent update")
        return 7

    assert retried("OPTIMIZE", step, attempts=3, backoff_s=0) == 7 and len(calls) == 3

    def always() -> int:
        raise RuntimeError("io.delta.exceptions.ConcurrentAppendException: concurrent update")

    with pytest.raises(JobFailed, match=r"OPTIMIZE: another writer's commits kept conflicting; gave up after 2 "
                                        r"attempts: .*ConcurrentAppendException"):
        retried("OPTIMIZE", always, attempts=2, backoff_s=0)


def test_any_other_error_stops_at_once():
    calls = []

    def step() -> None:
        calls.append(1)
        raise ValueError("requirement failed: Are you sure you would like to vacuum files with such a low retention")

    with pytest.raises(ValueError):
        retried("VACUUM", step, attempts=5, backoff_s=0)
    assert len(calls) == 1


def _state(gen: int | None, **offsets: int) -> AppState:
    return AppState(5, {("t", int(p[1:])): o for p, o in offsets.items()}, {}, gen, 3)


def test_lost_or_lower_offsets_are_reported_and_a_new_generation_may_rewind():
    before = {"a": _state(0, p0=10, p1=20), "b": _state(0, p0=5), "c": _state(1, p0=100)}
    assert lost_offsets(before, {"a": _state(0, p0=12, p1=20), "b": _state(0, p0=5), "c": _state(2, p0=1),
                                 "new": _state(0, p0=1)}) == []
    problems = lost_offsets(before, {"a": _state(0, p0=10, p1=19), "c": _state(1, p0=100)})
    assert problems == ["app a (generation 0): offsets went back: t-1 20 -> 19",
                        'app b kept offsets {"t":{"0":5}} before and none after']


@pytest.mark.parametrize("value, hours", [(None, None), ("", None), ("0", 0), ("168", 168), ("24.0", 24)])
def test_vacuum_retention_is_whole_hours_or_the_tables_own(value, hours):
    from jobs.config import JobConfig
    from jobs.maintain import retention_setting

    overrides = [] if value is None else [f"maintain.vacuum.retention.hours={value}"]
    assert retention_setting(JobConfig.load("maintain", None, overrides)) == hours


@pytest.mark.parametrize("value", ["0.4", "-1", "a week"])
def test_a_retention_delta_would_round_or_cannot_read_is_refused(value):
    from jobs.config import JobConfig, JobConfigError
    from jobs.maintain import retention_setting

    with pytest.raises(JobConfigError, match="whole number of hours"):
        retention_setting(JobConfig.load("maintain", None, [f"maintain.vacuum.retention.hours={value}"]))
