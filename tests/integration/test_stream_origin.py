"""The `pylog` stream source keeps a query's origin (sparklog.offsets.ORIGIN_KEY), driven as Spark drives it.

Spark runs a query's first batch from the source's initialOffset() and, after a restart with that batch
planned (its end in `<checkpoint>/offsets/0`) but not committed, calls initialOffset() again on a new
reader: with startingOffsets=latest that resolves afresh, later. The batch must still be read from where
it was planned. Real broker, the reader's own Kafka clients; no Spark needed to call the methods.
"""
from __future__ import annotations

from pyspark.sql.streaming.datasource import ReadAllAvailable

from sparklog import offsets as off
from sparklog.options import parse_stream_options
from sparklog.stream_reader import PylogStreamReader
from tests.support.clients import create_topic
from tests.support.jobs import produce_events


def _reader(bootstrap: str) -> PylogStreamReader:
    return PylogStreamReader(parse_stream_options({"kafka.bootstrap.servers": bootstrap, "subscribe": "o",
                                                   "startingOffsets": "latest"}))


def test_a_first_batch_re_run_after_a_restart_starts_at_its_origin_not_at_latest_resolved_again(pylog_broker):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "o", partitions=2)
    produce_events(bootstrap, "o", 0, 40)                      # before the query: not read (latest)
    first = _reader(bootstrap)
    initial = first.initialOffset()
    assert off.origin_of(initial) == off.from_offset_dict(initial)
    produce_events(bootstrap, "o", 40, 60)
    end = first.latestOffset(initial, ReadAllAvailable())       # batch 0, written to offsets/0 before it runs
    assert off.origin_of(end) == off.from_offset_dict(initial), "the first batch's end carries the origin"
    assert sum(off.from_offset_dict(end).values()) - sum(off.from_offset_dict(initial).values()) == 60
    first.stop()

    produce_events(bootstrap, "o", 100, 25)                     # arrives while the query is down
    again = _reader(bootstrap)
    fresh = again.initialOffset()                               # `latest` now: 25 records further
    assert sum(off.from_offset_dict(fresh).values()) == sum(off.from_offset_dict(end).values()) + 25
    ranges = again.partitions(fresh, end)
    planned = {(r.topic, r.partition): (r.start, r.end) for task in ranges for r in task.ranges}
    assert planned == {tp: (off.from_offset_dict(initial)[tp], o) for tp, o in off.from_offset_dict(end).items()}
    # the next batch starts at batch 0's end and no longer carries the origin
    nxt = again.latestOffset(end, ReadAllAvailable())
    assert off.origin_of(nxt) is None and sum(off.from_offset_dict(nxt).values()) == 125
    # with nothing new, the same offset comes back, so Spark runs no batch
    assert again.latestOffset(nxt, ReadAllAvailable()) == nxt
    again.stop()
