"""A randomized soak of user actions around `stream_to_delta`, with a checker after every action.

The stream runs with source.fail.on.data.loss=false, the mode in which every action below is
tolerated. After each action the job catches up (trigger available-now) and the checker holds the
table against the records the producer had acknowledged:
  - no event id appears twice in the table;
  - every row is an acknowledged record;
  - every record still readable from the topic (not deleted with its topic, not removed by
    retention or DeleteRecords) is in the table.
Actions: produce, topic delete and re-create, partition increase, reprocess replace, broker kill -9,
job SIGKILL and SIGTERM mid-run, retention deleting unread data (DeleteRecords), and a rival stream
with the same app id and another checkpoint.
"""
from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.jobs import event_ids, finish, kill, produce_events, run_job, table_versions

TOPIC = "events"
ACTIONS = ("recreate", "add-partitions", "reprocess-replace", "broker-kill", "job-sigkill", "job-sigterm",
           "retention", "rival-stream")


@dataclass
class SoakReport:
    actions: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def readable_event_ids(bootstrap: str, topic: str) -> list[int]:
    """Every event id a consumer reads from the topic now, from each partition's log start to its end."""
    import json

    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=10).topics[topic]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-checker", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in md.partitions}
        todo = {p for p, (low, high) in ends.items() if high > low}
        c.assign([TopicPartition(topic, p, ends[p][0]) for p in todo])
        out: list[int] = []
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:   # _PARTITION_EOF
                    todo.discard(m.partition())
                continue
            out.append(int(json.loads(m.value())["event_id"]))
            if m.offset() + 1 >= ends[m.partition()][1]:
                todo.discard(m.partition())
        assert not todo, f"could not read partitions {sorted(todo)} to their end"
        return sorted(out)
    finally:
        c.close()


class Soak:
    def __init__(self, broker: BrokerProcess, tmp: Path, seed: int) -> None:
        self.broker, self.tmp, self.rnd = broker, tmp, random.Random(seed)
        self.next_id = 0
        self.acked: set[int] = set()
        self.report = SoakReport()
        self.table = tmp / "table"

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def settings(self, **extra: object) -> dict[str, object]:
        return {"source.bootstrap.servers": self.bootstrap, "source.topics": TOPIC, "sink.table.path": self.table,
                "sink.checkpoint.location": self.tmp / "ckpt", "sink.app.id": "soak", "group.mirror": "",
                "trigger": "available-now", "source.max.offsets.per.trigger": 150,
                "source.fail.on.data.loss": "false", **extra}

    def produce(self, lo: int = 50, hi: int = 300) -> None:
        n = self.rnd.randint(lo, hi)
        produce_events(self.bootstrap, TOPIC, self.next_id, n)
        self.acked.update(range(self.next_id, self.next_id + n))
        self.next_id += n

    # --- actions ----------------------------------------------------------------------------------

    def recreate(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for f in admin.delete_topics([TOPIC]).values():
            f.result()
        while TOPIC in admin.list_topics(timeout=10).topics:
            time.sleep(0.2)
        create_topic(self.bootstrap, TOPIC, partitions=self.rnd.randint(1, 3))

    def add_partitions(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        count = len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
        for f in admin.create_partitions([NewPartitions(TOPIC, count + 1)]).values():
            f.result()

    def reprocess_replace(self) -> None:
        finish(run_job("reprocess", {"source.bootstrap.servers": self.bootstrap, "source.topics": TOPIC,
                                     "sink.table.path": self.table, "sink.app.id": "soak",
                                     "reprocess.mode": "replace", "group.mirror": ""}))

    def rival_stream(self) -> None:
        """A second stream with the same app id and its own checkpoint: it takes the table over."""
        finish(run_job("stream_to_delta", self.settings(**{"sink.checkpoint.location": self.tmp / "ckpt-rival"})))

    def broker_kill(self) -> None:
        self.broker.kill()
        self.broker.start()

    def job_sigkill(self) -> None:
        self._job_then(signal.SIGKILL)

    def job_sigterm(self) -> None:
        self._job_then(signal.SIGTERM)

    def _job_then(self, sig: int) -> None:
        before = table_versions(self.table)
        proc = run_job("stream_to_delta", self.settings())
        deadline = time.monotonic() + 120
        while proc.poll() is None and table_versions(self.table) <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(self.rnd.uniform(0.0, 1.5))
        if proc.poll() is not None:
            proc.communicate()
            return
        if sig == signal.SIGKILL:
            kill(proc)
            return
        os.killpg(proc.pid, sig)
        out, _ = proc.communicate(timeout=120)
        if proc.returncode not in (0, 128 + sig):
            self.report.violations.append(f"SIGTERM: job exited {proc.returncode}: {out[-1500:]}")
        elif len(out.splitlines()) > 60:
            self.report.violations.append(f"SIGTERM: {len(out.splitlines())} lines of output: {out[-1500:]}")

    def retention(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-retention"})
        try:
            parts = list(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
            p = self.rnd.choice(parts)
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        finally:
            c.close()
        if high > low:
            cut = self.rnd.randint(low + 1, high)
            for f in admin.delete_records([TopicPartition(TOPIC, p, cut)]).values():
                f.result()

    # --- the loop ---------------------------------------------------------------------------------

    def check(self, action: str) -> None:
        out = run_job("stream_to_delta", self.settings())
        try:
            finish(out, timeout=300)
        except AssertionError as e:
            self.report.violations.append(f"after {action}: the catch-up run failed: {str(e)[-2000:]}")
            return
        rows = event_ids(self.table) if table_versions(self.table) else []
        dupes = [i for i, n in Counter(rows).items() if n > 1]
        unknown = set(rows) - self.acked
        missing = set(readable_event_ids(self.bootstrap, TOPIC)) - set(rows)
        for what, bad in (("duplicated", dupes), ("never acknowledged", unknown), ("readable but missing", missing)):
            if bad:
                self.report.violations.append(f"after {action}: {len(bad)} event ids {what}, e.g. {sorted(bad)[:5]}")

    def run(self, actions: int, on_action: Callable[[int, str], None] = lambda i, a: None) -> SoakReport:
        create_topic(self.bootstrap, TOPIC, partitions=2)
        self.produce()
        self.check("start")
        every = list(ACTIONS)
        self.rnd.shuffle(every)   # the first len(ACTIONS) actions try each kind once, then any at random
        for i in range(actions):
            action = every[i] if i < len(every) else self.rnd.choice(ACTIONS)
            on_action(i, action)
            self.produce()
            getattr(self, action.replace("-", "_"))()
            self.produce(0, 150)
            self.report.actions.append(action)
            self.check(action)
            if self.report.violations:
                break
        return self.report
