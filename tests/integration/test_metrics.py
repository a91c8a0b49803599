"""The broker's Prometheus endpoint (`metrics.port`), scraped over HTTP as Prometheus scrapes it and read with
prometheus_client's own parser: what was produced, fetched and committed shows up exactly; a scrape held open by a
slow scraper, and scrapes in a loop, leave the broker serving."""
from __future__ import annotations

import datetime
import socket
import threading
import urllib.request
from typing import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i32, i64
from prometheus_client.parser import text_string_to_metric_families

from pylog.launch.process import BrokerProcess, free_port
from tests.support.wire import WireClient


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("metrics"), settings={
        "metrics.port": port, "group.initial.rebalance.delay.ms": 0}).start()
    try:
        yield b, port
    finally:
        b.close()


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of a scrape: name -> [(labels, value)]."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == want for k, want in labels.items()))


def test_produced_records_and_bytes_are_counted_exactly_per_topic(broker: tuple[BrokerProcess, int]) -> None:
    b, port = broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("counted", 3, 1)])["counted"].result(30)
    before = scrape(port)
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 0})
    for i in range(5000):
        producer.produce("counted", f"value-{i}".encode(), partition=i % 3)
    assert producer.flush(20) == 0
    after = scrape(port)
    assert total(after, "pylog_messages_in_total", topic="counted") - \
        total(before, "pylog_messages_in_total", topic="counted") == 5000
    assert total(after, "pylog_bytes_in_total", topic="counted") > 5000 * len("value-0")
    ends = {s[0]["partition"]: s[1] for s in after["pylog_log_end_offset"] if s[0]["topic"] == "counted"}
    assert sum(ends.values()) == 5000 and len(ends) == 3
    # each request is timed: the histogram's count per API is the request counter
    assert total(after, "pylog_request_duration_seconds_count", api="Produce") == \
        total(after, "pylog_requests_total", api="Produce") > 0


def test_consumer_lag_is_the_high_watermark_minus_the_committed_offset(broker: tuple[BrokerProcess, int]) -> None:
    b, port = broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("lagging", 2, 1)])["lagging"].result(30)
    producer = Producer({"bootstrap.servers": b.bootstrap, "log_level": 0})
    for i in range(300):
        producer.produce("lagging", b"x", partition=i % 2)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "log_level": 0})
    consumer.commit(offsets=[TopicPartition("lagging", 0, 100), TopicPartition("lagging", 1, 30)],
                    asynchronous=False)
    samples = scrape(port)
    for partition, committed in ((0, 100), (1, 30)):
        high = consumer.get_watermark_offsets(TopicPartition("lagging", partition), timeout=10)[1]
        labels = {"group": "reader", "topic": "lagging", "partition": str(partition)}
        assert total(samples, "pylog_consumer_group_committed_offset", **labels) == committed
        assert total(samples, "pylog_consumer_group_lag", **labels) == high - committed == 150 - committed
    consumer.commit(offsets=[TopicPartition("lagging", 0, 150)], asynchronous=False)       # caught up
    assert total(scrape(port), "pylog_consumer_group_lag", group="reader", topic="lagging", partition="0") == 0
    consumer.close()


def test_errors_are_counted_per_api_and_kafka_error_name(broker: tuple[BrokerProcess, int]) -> None:
    b, port = broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("short", 1, 1)])["short"].result(30)
    before = total(scrape(port), "pylog_request_errors_total", api="Fetch", error="OFFSET_OUT_OF_RANGE")
    request = FetchRequest(cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(0),
                           max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
                           topics=(FetchTopic(topic="short", partitions=(FetchPartition(
                               partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(10**9),
                               last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                               partition_max_bytes=i32(1 << 20)),)),), forgotten_topics_data=(), rack_id="")
    with WireClient("127.0.0.1", b.port) as wire:
        wire.request(request)
        samples = scrape(port)
        assert total(samples, "pylog_connections", listener="PLAINTEXT") >= 1       # this one is open
    assert total(samples, "pylog_request_errors_total", api="Fetch", error="OFFSET_OUT_OF_RANGE") == before + 1


def test_scrapes_held_open_or_in_a_loop_leave_the_broker_serving(broker: tuple[BrokerProcess, int]) -> None:
    """Three scrapers connect and never read; another scrapes in a loop; meanwhile 20,000 records go through
    produce and consume, and every loop scrape parses."""
    b, port = broker
    held = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        held.append(s)
    stop = threading.Event()
    scraped: list[float] = []

    def loop() -> None:
        while not stop.is_set():
            scraped.append(total(scrape(port), "pylog_messages_in_total", topic="busy"))
    scraper = threading.Thread(target=loop, daemon=True)
    scraper.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("busy", 2, 1)])["busy"].result(30)
        producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 0})
        for i in range(20000):
            producer.produce("busy", b"v" * 100, partition=i % 2)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "busy-reader", "log_level": 0,
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("busy", p, 0) for p in range(2)])
        got = 0
        while got < 20000:
            batch = consumer.consume(5000, 10)
            assert batch, f"the consumer stalled after {got} records"
            got += sum(1 for m in batch if not m.error())
        consumer.close()
    finally:
        stop.set()
        scraper.join(20)
        for s in held:
            s.close()
    assert len(scraped) >= 2 and scraped == sorted(scraped) and scraped[-1] <= 20000
    assert total(scrape(port), "pylog_bytes_out_total", topic="busy") >= 20000 * 100


def test_every_series_is_documented_and_the_dashboard_uses_only_documented_ones(
        broker: tuple[BrokerProcess, int]) -> None:
    """docs/METRICS.md lists what a scrape has (the series of cluster mode and tiered storage aside, marked so), and
    conf/grafana/pylog-broker.json queries nothing else. Runs after the module's other cases (groups, errors)."""
    import json
    import re
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    rows = [line for line in (repo / "docs" / "METRICS.md").read_text().splitlines()
            if line.startswith("| `pylog_") and not line.startswith("| `pylog_job_")]   # a job's: test_job_metrics
    documented = {re.match(r"\| `(pylog_\w+)`", row).group(1): "cluster mode" in row or "tiered storage:" in row
                  for row in rows}
    samples = {name for name in scrape(broker[1]) if name.startswith("pylog_")}

    def family(name: str) -> str:
        return re.sub(r"_(bucket|count|sum)$", "", name) if name not in documented else name
    assert {family(n) for n in samples} == {d for d, cluster_only in documented.items() if not cluster_only}
    dashboard = json.loads((repo / "conf" / "grafana" / "pylog-broker.json").read_text())
    used = {family(n) for p in dashboard["panels"] for t in p["targets"] for n in re.findall(r"pylog_\w+", t["expr"])}
    assert used <= set(documented) and len(used) >= 15, used - set(documented)


def test_the_metrics_page_examples_run_as_written(tmp_path_factory: pytest.TempPathFactory) -> None:
    """docs/METRICS.md: its server.properties lines start a broker whose endpoint is the target its
    prometheus.yml scrapes (the port 9404 becomes a free one)."""
    import re
    from pathlib import Path
    from kafka_protocol.properties import read_properties
    from tests.support.markdown_examples import readme, substitute
    examples = readme(Path(__file__).resolve().parents[2] / "docs" / "METRICS.md")
    assert [b.lang for b in examples] == ["properties", "yaml"]
    names = {"9404": str(free_port())}
    workdir = tmp_path_factory.mktemp("metrics-page")
    (workdir / "server.properties").write_text(substitute(examples[0].code, names))
    settings = read_properties(workdir / "server.properties")
    targets = re.findall(r'targets: \["([^"]+)"\]', substitute(examples[1].code, names))
    b = BrokerProcess(workdir / "data", settings=settings).start()
    try:
        [target] = targets
        text = urllib.request.urlopen(f"http://{target}/metrics", timeout=10).read()
        assert b"pylog_log_recovery_seconds" in text
    finally:
        b.close()
