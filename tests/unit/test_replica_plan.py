"""Plans of replica moves for a broker leaving or joining (pylog/tools/replica_plan.py)."""
from __future__ import annotations

import pytest

from pylog.tools.replica_plan import add_broker_plan, decommission_plan, replica_counts

RACKS = {0: "a", 1: "b", 2: "a", 3: "b"}


def test_a_leaving_brokers_replicas_go_to_the_emptiest_broker_on_a_rack_the_partition_lacks():
    assignment = {("t", 0): [0, 1], ("t", 1): [1, 0], ("t", 2): [2, 3], ("u", 0): [0, 2]}
    plan = decommission_plan(assignment, [0, 1, 2, 3], RACKS, 0)
    assert set(plan) == {("t", 0), ("t", 1), ("u", 0)}                  # only what broker 0 held
    assert all(0 not in r for r in plan.values())
    assert plan[("t", 0)][1] == 1 and plan[("t", 1)][0] == 1           # broker 0's place taken, order kept
    assert all({RACKS[r] for r in plan[tp]} == {"a", "b"} for tp in [("t", 0), ("t", 1)])   # still both racks
    assert plan[("u", 0)] == [3, 2]          # its other replica is on rack a: rack b, emptier broker 3


def test_a_partition_with_nowhere_to_go_is_refused():
    with pytest.raises(ValueError, match="t-0 has 3 replicas and only 2 brokers would stay"):
        decommission_plan({("t", 0): [0, 1, 2]}, [0, 1, 2], {}, 0)


def test_a_joining_broker_takes_replicas_from_the_fullest_until_the_shares_are_even():
    assignment = {("t", p): [p % 3, (p + 1) % 3] for p in range(6)}          # 4 replicas on each of 0, 1, 2
    plan = add_broker_plan(assignment, [0, 1, 2, 3], 3)
    after = {**assignment, **plan}
    counts = replica_counts(after, [0, 1, 2, 3])
    assert counts[3] == 3 and max(counts.values()) - min(counts.values()) <= 1
    assert all(len(set(r)) == len(r) for r in after.values())
    assert add_broker_plan(after, [0, 1, 2, 3], 3) == {}                     # even already: nothing to move


def test_two_brokers_join_and_leave_together():
    """Growing 3 -> 5 and shrinking back in one plan each: every partition keeps distinct replicas, the five
    brokers hold even shares, and the leaving pair ends with none."""
    assignment = {("t", p): [p % 3, (p + 1) % 3] for p in range(10)}          # 20 replicas on 0, 1, 2
    grown = {**assignment, **add_broker_plan(assignment, [0, 1, 2, 3, 4], [3, 4])}
    counts = replica_counts(grown, [0, 1, 2, 3, 4])
    assert counts == {b: 4 for b in range(5)}, counts
    assert all(len(set(r)) == len(r) for r in grown.values())
    plan = decommission_plan(grown, [0, 1, 2, 3, 4], {}, [3, 4])
    shrunk = {**grown, **plan}
    assert all(3 not in r and 4 not in r and len(set(r)) == 2 for r in shrunk.values())
    assert set(plan) == {tp for tp, r in grown.items() if {3, 4} & set(r)}
    counts = replica_counts(shrunk, [0, 1, 2])
    assert max(counts.values()) - min(counts.values()) <= 1, counts
