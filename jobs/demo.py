"""`make demo`: start the embedded broker, create a topic, produce realistic events, read them back.

Owns only the demo's orchestration: every step goes through the public surfaces a user has (the
`pylog broker` process, a Kafka client, kcat when installed). Stops everything it started, even on
failure.
"""
from __future__ import annotations

import json
import logging
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.process import BrokerProcess

log = logging.getLogger("pylog.demo")

TOPIC = "events"
PARTITIONS = 4
EVENTS = 20_000
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
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "compression.type": "zstd"})
    now = int(time.time() * 1000)
    start = time.monotonic()
    failures: list[str] = []
    for i in range(EVENTS):
        ev = sample_event(i, now)
        while True:
            try:
                p.produce(TOPIC, key=str(ev["user_id"]).encode(), value=json.dumps(ev).encode(), timestamp=int(ev["ts"]),
                          on_delivery=lambda err, msg: failures.append(str(err)) if err else None)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(60) or failures:
        raise RuntimeError(f"{len(failures)} events were not delivered: {failures[:1]}")
    return time.monotonic() - start


def read_back(bootstrap: str) -> tuple[int, dict[str, int], dict[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-demo", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    by_type: dict[str, int] = {}
    ends: dict[int, int] = {}
    n = 0
    deadline = time.monotonic() + 60
    while n < EVENTS and time.monotonic() < deadline:
        for m in c.consume(5000, 1.0):
            if m.error():
                raise RuntimeError(str(m.error()))
            ev = json.loads(m.value())
            by_type[ev["type"]] = by_type.get(ev["type"], 0) + 1
            ends[m.partition()] = m.offset() + 1
            n += 1
    c.close()
    return n, by_type, ends


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    workdir = Path(tempfile.mkdtemp(prefix="pylog-demo-"))
    broker = BrokerProcess(workdir / "broker-data")
    try:
        log.info("starting the embedded broker (data in %s)", broker.data_dir)
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=15)
        log.info("created topic %s with %d partitions", TOPIC, PARTITIONS)
        secs = produce_events(broker.bootstrap)
        log.info("produced %d JSON events (acks=all, idempotent, zstd) in %.2fs", EVENTS, secs)
        n, by_type, ends = read_back(broker.bootstrap)
        print("\n=== pylog demo summary ===")
        print(f"events read back : {n} of {EVENTS}")
        print(f"end offsets      : {json.dumps({TOPIC: {str(p): o for p, o in sorted(ends.items())}})}")
        print("events by type   : " + ", ".join(f"{k}={v}" for k, v in sorted(by_type.items())))
        if shutil.which("kcat"):
            out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", TOPIC, "-p", "0", "-o", "-1", "-e", "-q"],
                                 capture_output=True, text=True, timeout=30)
            print(f"kcat, last event of partition 0: {out.stdout.strip()}")
        return 0 if n == EVENTS else 1
    finally:
        broker.close()
        shutil.rmtree(workdir, ignore_errors=True)
        log.info("stopped the broker and removed %s", workdir)


if __name__ == "__main__":
    sys.exit(main())
