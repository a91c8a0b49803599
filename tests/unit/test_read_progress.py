"""The executors' read progress: datagrams from ProgressSender summed by a real ProgressListener on loopback, the
option's address checked, and the progress line a batch job logs."""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

from jobs.progress import describe
from sparklog.options import OptionError, parse_batch_options
from sparklog.read_progress import ProgressListener, ProgressSender, parse_address


def _batches(sizes: list[int]):
    for n in sizes:
        yield pa.record_batch({"x": pa.array(range(n))})


def test_the_listener_counts_every_row_the_senders_pass_on_and_ignores_strangers():
    listener = ProgressListener()
    try:
        a, b = ProgressSender(listener.address), ProgressSender(listener.address)
        passed = sum(batch.num_rows for batch in a.counted(_batches([100, 250, 7])))
        passed += sum(batch.num_rows for batch in b.counted(_batches([1000])))
        host, port, _ = parse_address(listener.address)
        stranger = ProgressSender(f"{host}:{port}/{'00' * 8}")      # another listener's token
        list(stranger.counted(_batches([5000])))
    finally:
        listener.close()
    assert passed == 1357 and listener.records == 1357


def test_a_sender_whose_listener_is_gone_reads_on():
    listener = ProgressListener()
    address = listener.address
    listener.close()
    assert sum(b.num_rows for b in ProgressSender(address).counted(_batches([10, 20]))) == 30


def test_reports_go_out_while_a_task_reads_not_only_at_its_end(monkeypatch):
    monkeypatch.setattr("sparklog.read_progress.SEND_INTERVAL_S", 0.0)
    listener = ProgressListener()
    try:
        it = ProgressSender(listener.address).counted(_batches([10, 10, 10]))
        next(it), next(it)       # two batches through, the task still running
        deadline = time.monotonic() + 5
        while listener.records < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert listener.records >= 10
        list(it)
    finally:
        listener.close()
    assert listener.records == 30


@pytest.mark.parametrize("value, problem", [("localhost/00", "host:port/token"), ("h:0/" + "00" * 8, "host:port"),
                                            ("h:9/xyz", "16 hex digits"), ("h:9/" + "00" * 4, "16 hex digits")])
def test_a_bad_progress_address_is_an_option_error(value, problem):
    with pytest.raises(OptionError, match=problem):
        parse_batch_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "progressAddress": value})


def test_the_progress_line_says_records_rate_and_time_left():
    assert describe(120_000, 300_000, 2.0) == "120,000/300,000 records (40%), 60,000 records/s, about 3 s left"
    assert describe(0, 300_000, 2.0) == "0/300,000 records (0%)"
    assert describe(5, 0, 1.0) == "5 records, 5 records/s"
