"""Task planning and admission control of format("pylog"), as Spark's Kafka connector computes them."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from sparklog.planner import (
    SINGLE_TASK_RECORDS,
    OffsetRange,
    backlog,
    byte_limit,
    coalesce,
    plan_tasks,
    rate_limit,
    split_ranges,
)


def _covers_exactly(pieces, ranges):
    for r in ranges:
        mine = sorted((p.start, p.end) for p in pieces if p.tp == r.tp)
        if r.size <= 0:
            assert mine == []
            continue
        assert mine[0][0] == r.start and mine[-1][1] == r.end
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:])), f"gap or overlap: {mine}"
        assert all(e > s for s, e in mine)


def test_one_task_per_partition_without_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5), OffsetRange("u", 0, 3, 4)]
    assert split_ranges(ranges) == [ranges[0], ranges[2]], "empty ranges get no task"


def test_min_partitions_splits_in_proportion_to_size():
    pieces = split_ranges([OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10)], min_partitions=10)
    assert [(p.partition, p.start, p.end) for p in pieces] == \
        [(0, i * 10, i * 10 + 10) for i in range(9)] + [(1, 0, 10)]


def test_max_records_per_partition_caps_each_task():
    pieces = split_ranges([OffsetRange("t", 0, 0, 100)], max_records_per_partition=30)
    assert [p.size for p in pieces] == [25, 25, 25, 25]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=8),
       st.integers(1, 64), st.one_of(st.none(), st.integers(1, 2000)))
def test_splitting_never_leaves_gaps_or_overlaps(spans, min_partitions, max_records):
    ranges = [OffsetRange("t", i, s, s + n) for i, (s, n) in enumerate(spans)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    _covers_exactly(pieces, ranges)
    if max_records:
        assert all(p.size <= max_records or min_partitions > 1 for p in pieces)


def test_rate_limit_is_proportional_to_backlog():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 90, ("t", 1): 10}
    assert rate_limit(50, start, latest, {}) == {("t", 0): 45, ("t", 1): 5}


def test_rate_limit_never_starves_small_partitions_nor_passes_latest():
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 10_000, ("t", 1): 101}
    end = rate_limit(10, start, latest, {})
    assert end == {("t", 0): 9, ("t", 1): 101}


def test_rate_limit_counts_new_partitions_from_their_start():
    end = rate_limit(10, {("t", 0): 0}, {("t", 0): 10, ("t", 1): 30}, {("t", 1): 20})
    assert end == {("t", 0): 5, ("t", 1): 25}
    assert backlog({("t", 0): 0}, {("t", 0): 10, ("t", 1): 30}) == 40


@given(st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 100), st.integers(0, 1000)), min_size=1),
       st.integers(1, 500))
def test_rate_limit_stays_within_start_and_latest(parts, limit):
    start = {("t", p): s for p, (s, n) in parts.items()}
    latest = {("t", p): s + n for p, (s, n) in parts.items()}
    end = rate_limit(limit, start, latest, {})
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    admitted = sum(end[tp] - start[tp] for tp in latest)
    assert admitted <= limit + len(parts), "at most the limit plus one per starved partition"


def test_small_ranges_of_many_partitions_coalesce_to_one_task_per_slot():
    ranges = [OffsetRange("t", p, 0, 1_000) for p in range(8)]
    tasks = coalesce(ranges, slots=2)
    assert len(tasks) == 2 and [t.size for t in tasks] == [4_000, 4_000]
    assert all(list(t.ranges) == sorted(t.ranges, key=lambda r: (r.topic, r.partition)) for t in tasks)


def test_a_small_read_is_one_task_unless_min_partitions_asks_for_more():
    micro_batch = [OffsetRange("t", p, 0, 1_250) for p in range(8)]   # maxOffsetsPerTrigger 10,000
    tasks = plan_tasks(micro_batch, slots=2)
    assert len(tasks) == 1 and tasks[0].size == 10_000
    assert [r.partition for r in tasks[0].ranges] == list(range(8)), "ranges read in partition order"
    assert len(plan_tasks(micro_batch, min_partitions=2, slots=2)) == 2
    per = SINGLE_TASK_RECORDS // 8
    assert len(plan_tasks([OffsetRange("t", p, 0, per) for p in range(8)], slots=2)) == 1
    assert len(plan_tasks([OffsetRange("t", p, 0, per + 1) for p in range(8)], slots=2)) == 2, "beyond: one per slot"


def test_large_reads_get_more_tasks_in_whole_waves():
    ranges = [OffsetRange("t", p, 0, 375_000) for p in range(8)]      # 3 M records
    assert len(coalesce(ranges, slots=2, task_records=1_000_000)) == 4
    assert len(coalesce(ranges, slots=2, task_records=100_000)) == 8, "never more tasks than ranges"


def test_min_partitions_and_max_records_bound_the_plan():
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10)]
    assert len(plan_tasks(ranges, min_partitions=10, slots=2)) == 10
    capped = plan_tasks(ranges, max_records_per_partition=25, slots=2)
    assert all(t.size <= 25 for t in capped) and sum(t.size for t in capped) == 100


# maxRecordsPerPartition 1 over ~40,000 records plans that many tasks: ~0.3 s on a loaded 2-core machine
@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=12),
       st.integers(1, 16), st.one_of(st.none(), st.integers(1, 16)), st.one_of(st.none(), st.integers(1, 2000)))
def test_a_plan_reads_every_offset_once(spans, slots, min_partitions, max_records):
    ranges = [OffsetRange("t", i, s, s + n) for i, (s, n) in enumerate(spans)]
    tasks = plan_tasks(ranges, min_partitions, max_records, slots=slots)
    _covers_exactly([r for t in tasks for r in t.ranges], ranges)
    assert all(t.ranges for t in tasks)
    if max_records and not min_partitions:
        assert all(t.size <= max_records for t in tasks)
    if min_partitions:
        assert len(tasks) >= min(min_partitions, len(split_ranges(ranges, min_partitions, max_records)))


def test_byte_limit_weighs_backlogs_by_stored_record_size():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 100, ("t", 1): 100}
    sizes = {("t", 0): 1000.0, ("t", 1): 10.0}       # bytes per record
    end = byte_limit(10_100, start, latest, {}, sizes)
    # backlogs 100 KB and 1 KB: shares 10,000 B (10 records) and 100 B (10 records)
    assert end == {("t", 0): 10, ("t", 1): 10}


def test_byte_limit_reads_at_least_one_record_and_never_passes_latest():
    start = {("t", 0): 5, ("t", 1): 0}
    latest = {("t", 0): 6, ("t", 1): 3}
    assert byte_limit(1, start, latest, {}, {("t", 0): 500.0, ("t", 1): 500.0}) == {("t", 0): 6, ("t", 1): 1}
    assert byte_limit(10**9, start, latest, {}, {}) == latest, "no estimate: the mean (1 byte) of nothing"


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.floats(0, 5000)), min_size=1, max_size=6),
       st.integers(1, 10**7))
def test_byte_limit_stays_within_each_partitions_backlog(parts, limit):
    start = {("t", i): s for i, (s, _, _) in enumerate(parts)}
    latest = {("t", i): s + n for i, (s, n, _) in enumerate(parts)}
    sizes = {("t", i): b for i, (_, _, b) in enumerate(parts)}
    end = byte_limit(limit, start, latest, {}, sizes)
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
        if latest[tp] > start[tp]:
            assert end[tp] > start[tp], "every partition with a backlog moves"

