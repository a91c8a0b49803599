"""KIP-392's choice of a replica for a consumer (broker.replication.read_replica), as Kafka's
RackAwareReplicaSelector makes it, and the preferred read replica through the Fetch codec both ways."""
from __future__ import annotations

from kafka_protocol.fetch_response import PartitionData, decode_fetch_response, encode_fetch_response
from broker.replication.leader_state import LeaderState
from broker.replication.read_replica import NO_PREFERENCE, preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}
NOW, LAG = 100_000, 30_000


def _state(isr=(1, 2, 3, 4), ends=None, caught_up=None) -> LeaderState:
    s = LeaderState(1, (1, 2, 3, 4), isr, 0, 0, NOW)
    for f, end in (ends or {2: 50, 3: 60, 4: 60}).items():
        s.followers[f].log_end_offset = end
        s.followers[f].last_caught_up_ms = (caught_up or {}).get(f, NOW)
    return s


def test_the_most_caught_up_in_sync_follower_in_the_consumers_rack_is_chosen():
    assert preferred_read_replica("b", 1, _state(), RACKS, NOW, LAG) == 3
    assert preferred_read_replica("c", 1, _state(), RACKS, NOW, LAG) == 4
    tie = _state(ends={2: 60, 3: 60, 4: 60}, caught_up={2: NOW, 3: NOW - 10})
    assert preferred_read_replica("b", 1, tie, RACKS, NOW, LAG) == 2


def test_the_leader_serves_without_a_rack_in_its_own_rack_or_with_no_fit_follower():
    assert preferred_read_replica("", 1, _state(), RACKS, NOW, LAG) == NO_PREFERENCE
    assert preferred_read_replica("a", 1, _state(), RACKS, NOW, LAG) == NO_PREFERENCE
    assert preferred_read_replica("z", 1, _state(), RACKS, NOW, LAG) == NO_PREFERENCE
    assert preferred_read_replica("b", 1, _state(isr=(1, 4)), RACKS, NOW, LAG) == NO_PREFERENCE   # out of the ISR
    stale = _state(caught_up={2: NOW - LAG - 1, 3: NOW - LAG - 1})
    assert preferred_read_replica("b", 1, stale, RACKS, NOW, LAG) == NO_PREFERENCE


def test_the_preferred_read_replica_goes_through_the_fetch_codec_from_v11():
    for version, expected in ((11, 3), (12, 3), (10, -1)):
        chunks = encode_fetch_response(version, 7, [("t", [PartitionData(0, 0, 5, 5, 0, b"",
                                                                         preferred_read_replica=3)])])
        frame = b"".join(bytes(c) for c in chunks)
        body = memoryview(frame)[4 + 4 + (1 if version >= 12 else 0):]   # size, correlation id, header tags
        [fp] = decode_fetch_response(body, version).partitions
        assert fp.preferred_read_replica == expected and fp.high_watermark == 5
