"""The invariant every commit keeps (connectors.contiguity), on values: where a batch may start."""
from __future__ import annotations

import pytest

from connectors.contiguity import Batch, Stored, check, gaps
from connectors.errors import NotContiguousError


def test_a_batch_starting_at_the_tables_offsets_lines_up():
    assert gaps(Batch({("t", 0): 10, ("t", 1): 3}, {("t", 0): 20, ("t", 1): 3}), Stored({("t", 0): 10, ("t", 1): 3})) == {}


def test_a_gap_and_an_overlap_are_both_named():
    found = gaps(Batch({("t", 0): 12, ("t", 1): 1}, {("t", 0): 20, ("t", 1): 5}), Stored({("t", 0): 10, ("t", 1): 3}))
    assert found == {("t", 0): (12, 10), ("t", 1): (1, 3)}
    with pytest.raises(NotContiguousError, match=r"Delta table /t \(version 4\): batch 7 of app a does not start .*"
                                                 r"t-0 starts at 12 but the table's offset is 10, t-1 starts at 1 .*"
                                                 r"skip some records and repeat others.*do this"):
        check("/t", 4, "a", "batch 7", Batch({("t", 0): 12, ("t", 1): 1}, {}), Stored({("t", 0): 10, ("t", 1): 3}),
              hint="do this")


def test_partitions_the_table_never_stored_start_anywhere():
    assert gaps(Batch({("t", 0): 10, ("u", 0): 99}, {("t", 0): 11, ("u", 0): 100, ("t", 1): 5}),
                Stored({("t", 0): 10})) == {}


def test_a_partition_new_to_the_query_that_the_table_holds_is_refused():
    # a batch_load of the same app stored t-2; the stream discovers t-2 and would read it from its log start
    found = gaps(Batch({("t", 0): 10}, {("t", 0): 12, ("t", 2): 50}), Stored({("t", 0): 10, ("t", 2): 50}))
    assert found == {("t", 2): (None, 50)}
    with pytest.raises(NotContiguousError, match="t-2 is new to this query .* the table's offset is 50"):
        check("/t", 1, "a", "batch 3", Batch({("t", 0): 10}, {("t", 0): 12, ("t", 2): 50}),
              Stored({("t", 0): 10, ("t", 2): 50}))


def test_offsets_of_another_incarnation_of_the_topic_do_not_count():
    # the topic was deleted and created again: the table's 500 belongs to a log that is gone
    batch = Batch({("t", 0): 0}, {("t", 0): 40, ("t", 1): 7}, {"t": "new-id"})
    assert gaps(batch, Stored({("t", 0): 500, ("t", 1): 80}, {"t": "old-id"})) == {}
    assert gaps(batch, Stored({("t", 0): 500}, {"t": "new-id"})) == {("t", 0): (0, 500)}
