"""The txn encoding of a Delta table's source offsets: byte-identical across versions, so existing tables resume."""
from __future__ import annotations

import pytest

from connectors.offset_txns import AppState, apps_in, offset_app_id, offsets_from_txns, offsets_to_txns

# Written by every version of the sink so far; a table holding these must keep resuming from them.
STORED = {'pylog.offsets:["app","events",0]': 1200, 'pylog.offsets:["app","events",1]': 1187,
          'pylog.offsets:["other","events",0]': 5, "app": 3, "pylog.generation:app": 1}


def test_offsets_are_stored_as_one_txn_per_topic_partition_named_by_compact_json():
    assert offset_app_id("app", "events", 0) == 'pylog.offsets:["app","events",0]'
    assert offsets_to_txns("app", {("events", 1): 1187, ("events", 0): 1200}) == {
        'pylog.offsets:["app","events",0]': 1200, 'pylog.offsets:["app","events",1]': 1187}


def test_stored_txns_read_back_as_partition_offsets_of_their_app_only():
    assert offsets_from_txns(STORED, "app") == {("events", 0): 1200, ("events", 1): 1187}
    assert offsets_from_txns(STORED, "other") == {("events", 0): 5}
    assert apps_in(STORED) == ["app", "other"]
    state = AppState.from_txns(7, STORED, "app")
    assert (state.offsets, state.generation, state.last_batch) == ({("events", 0): 1200, ("events", 1): 1187}, 1, 3)


@pytest.mark.parametrize("spec", [-1, -2])
def test_only_concrete_offsets_are_stored(spec):
    with pytest.raises(ValueError, match=f"offset {spec} of events-0 is not a concrete offset"):
        offsets_to_txns("app", {("events", 0): spec})
