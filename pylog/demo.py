"""`make demo`: the main job end to end on the embedded default.

Starts one local broker (no ZooKeeper), creates a topic, produces realistic JSON events, runs
`stream_to_delta` with availableNow into a Delta table on disk, and prints a summary: rows in the
table, the offsets stored in it, and the lag of the consumer group that mirrors them. Stops the broker
it started, even on failure, and keeps what it made (the broker's data, the table, the checkpoint) in
one folder, `demo/` in the project (PYLOG_DEMO_DIR elsewhere), emptied at the start of each run; the
summary says how to look at it and how to remove it.
"""
from __future__ import annotations

import json
import logging
import random
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.launch.process import BrokerProcess
from connectors.offset_manager import OffsetManager, end_offsets
from jobs import stream_to_delta
from jobs.config import JobConfig
from sparklog.kafka_log import with_logger
from sparklog.offsets import PartitionOffsets, to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.demo")

TOPIC = "events"
PARTITIONS = 4
EVENTS = 20_000
MARK = ".pylog-demo"
EVENT_TYPES = ["page_view", "click", "add_to_cart", "checkout", "login", "logout"]


def sample_event(i: int, now_ms: int) -> dict[str, object]:
    rnd = random.Random(i)
    return {
        "event_id": str(uuid.UUID(int=rnd.getrandbits(128))),
        "user_id": f"user-{rnd.randint(1, 500):04d}",
        "type": rnd.choice(EVENT_TYPES),
        "amount": round(rnd.uniform(1, 300), 2) if rnd.random() < 0.2 else None,
        "ts": now_ms - (EVENTS - i) * 10,
    }


def produce_events(bootstrap: str) -> float:
    p = Producer(with_logger({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                              "linger.ms": 5, "compression.type": "zstd"}))
    now = int(time.time() * 1000)
    start = time.monotonic()
    failures: list[str] = []
    for i in range(EVENTS):
        ev = sample_event(i, now)
        while True:
            try:
                p.produce(TOPIC, key=str(ev["user_id"]).encode(), value=json.dumps(ev).encode(), timestamp=int(str(ev["ts"])),
                          on_delivery=lambda err, msg: failures.append(str(err)) if err else None)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(60) or failures:
        raise RuntimeError(f"{len(failures)} events were not delivered: {failures[:1]}")
    return time.monotonic() - start


def group_lag(bootstrap: str, group: str, ends: PartitionOffsets) -> int | None:
    """Lag of the consumer group that mirrors the table's offsets, as any Kafka lag monitor sees it."""
    c = Consumer(with_logger({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}))
    try:
        committed = c.committed([TopicPartition(t, p) for t, p in ends], timeout=10)
        return backlog({(tp.topic, tp.partition): max(tp.offset, 0) for tp in committed}, ends)
    except Exception as e:  # noqa: BLE001 - the summary says so instead of failing the demo
        log.warning("could not read group %s: %s", group, e)
        return None
    finally:
        c.close()


def demo_dir() -> Path:
    return Path(os.environ.get("PYLOG_DEMO_DIR") or Path(__file__).resolve().parents[1] / "demo").absolute()


def next_steps(workdir: Path, table: Path) -> str:
    py = sys.executable
    return "\n".join([
        f"everything the demo made is in {workdir}:",
        f"  look at the table  : {py} -c \"from deltalake import DeltaTable; "
        f"print(DeltaTable('{table}').to_pyarrow_dataset().head(5, use_threads=False))\"",
        f"  its offsets        : {py} -c \"from connectors.offset_manager import OffsetManager; "
        f"print(OffsetManager('{table}', 'demo-events').committed())\"",
        f"  its runs           : pylog job status stream_to_delta --set sink.table.path={table}",
        f"  the broker again   : pylog broker --data-dir {workdir / 'broker-data'} --port 9092",
        f"  remove it          : rm -rf {workdir}   (the next make demo starts it afresh)",
    ])


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    workdir = demo_dir()
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / MARK).exists():
        print(f"make demo: {workdir} exists and was not made by the demo; set PYLOG_DEMO_DIR to another folder",
              file=sys.stderr)
        return 2
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / MARK).write_text("made by make demo (pylog/demo.py); emptied by its next run\n")
    broker = BrokerProcess(workdir / "broker-data")
    table = workdir / "tables" / "events"
    try:
        log.info("starting the embedded broker (data in %s)", broker.data_dir)
        broker.start()
        admin = AdminClient(with_logger({"bootstrap.servers": broker.bootstrap}))
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=15)
        del admin
        log.info("created topic %s with %d partitions", TOPIC, PARTITIONS)
        secs = produce_events(broker.bootstrap)
        log.info("produced %d JSON events (acks=all, idempotent, zstd) in %.2fs", EVENTS, secs)
        cfg = JobConfig.load("stream_to_delta", overrides=[
            f"source.bootstrap.servers={broker.bootstrap}", f"source.topics={TOPIC}",
            f"sink.table.path={table}", f"sink.checkpoint.location={workdir / 'checkpoints' / 'events'}",
            "sink.app.id=demo-events", "group.mirror=demo-events", "trigger=available-now",
            "source.max.offsets.per.trigger=5000", "source.starting.offsets=earliest"])
        log.info("running stream_to_delta (availableNow, at most 5000 offsets per batch) into %s", table)
        rc = stream_to_delta.run(cfg)
        if rc != 0:
            return rc
        from deltalake import DeltaTable

        from jobs.run_history import read_runs

        dt = DeltaTable(str(table))
        # pyarrow's own scan on one thread: deltalake 1.6's to_pyarrow_table (and threaded scans) can leave
        # threads that abort the process at exit ("terminate called without an active exception")
        rows = dt.to_pyarrow_dataset().to_table(columns=["topic", "partition", "offset", "type"], use_threads=False)
        distinct = len(set(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist())))
        stored = OffsetManager(str(table), "demo-events").committed()
        ends = end_offsets(broker.bootstrap, [TOPIC])
        lag = group_lag(broker.bootstrap, "demo-events", ends)
        by_type: dict[str, int] = {}
        for t in rows.column("type").to_pylist():
            by_type[t] = by_type.get(t, 0) + 1
        print("\n=== pylog demo summary ===")
        print(f"rows in the Delta table : {rows.num_rows} ({distinct} distinct topic-partition-offsets, "
              f"{EVENTS} produced), table version {dt.version()}")
        print(f"offsets stored in table : {to_json(stored)}")
        print(f"broker end offsets      : {to_json(ends)}")
        print(f"consumer group lag      : {'unavailable' if lag is None else lag} (group demo-events)")
        print("events by type          : " + ", ".join(f"{k}={v}" for k, v in sorted(by_type.items())))
        [run] = read_runs(str(table), last=1)
        print(f"this run (job status)   : {run.outcome}, {run.batches} Delta commits of {run.rows} rows, "
              f"versions {run.first_version}-{run.last_version}")
        ok = rows.num_rows == distinct == EVENTS == run.rows and stored == ends
        print("exactly once            : " + ("yes" if ok else "NO"))
        print("\n" + next_steps(workdir, table))
        return 0 if ok else 1
    finally:
        broker.close()
        log.info("stopped the broker; its data and the table stay in %s", workdir)


if __name__ == "__main__":
    sys.exit(main())
