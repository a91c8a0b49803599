"""A model-based test of exactly-once into Delta: random user actions, and after each what the table must hold.

The rules are what a data engineer does around `pylog job stream_to_delta` on one table and app id
(`eo`), each run as a real process against a real broker: produce more; run the stream to completion with
other options (maxOffsetsPerTrigger); SIGKILL it at a chosen stage of a batch (planned: Spark wrote its
offsets; written: Parquet files exist; committed: the Delta commit landed) or SIGTERM it; delete the
checkpoint, or put back an old copy of it; point another job (another table and app) at the same
checkpoint, or rename the app without a new checkpoint; run `batch_load` or `reprocess` (replace) on the
same table and app, or a rival stream of the app with its own checkpoint; VACUUM with zero retention
between runs or beside a running job; OPTIMIZE; add partitions to the topic, re-create it, or delete
records from it (retention); SIGKILL the broker and start it again.

The model knows which records the producer had acknowledged and which are still readable, and what
each action may do:
  - after every action the table holds no event id twice and only acknowledged ids;
  - after an action that must finish (a run, a batch_load, a reprocess) it exited 0 and the table holds
    every record still readable from the topic;
  - an action that must be refused (a shared checkpoint, a renamed app on the old checkpoint) exited
    non-zero with a one-line reason and changed neither table;
  - a run beside a zero-retention VACUUM either finished, or was refused naming the deleted files.
Anything else is a violation. The stream runs with source.fail.on.data.loss=false, in which a
re-created topic is read from its new start instead of stopping the job.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from deltalake import DeltaTable

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.jobs import event_ids, kill, produce_events, run_job, table_versions

TOPIC = "events"
APP = "eo"
STAGES = ("planned", "written", "committed")

# action -> weight: cheap actions often, Spark runs (each a JVM) less
ACTIONS: dict[str, int] = {
    "produce": 6, "run": 4, "kill-planned": 2, "kill-written": 2, "kill-committed": 2, "sigterm": 1,
    "delete-checkpoint": 1, "save-checkpoint": 1, "restore-old-checkpoint": 1, "share-checkpoint": 1,
    "rename-app": 1, "batch-load": 2, "reprocess-replace": 1, "vacuum": 1, "vacuum-beside": 1, "optimize": 1,
    "add-partitions": 1, "recreate-topic": 1, "broker-kill": 1, "retention": 1, "rival-stream": 1,
}


@dataclass
class ModelReport:
    actions: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(self.actions).items()))





def readable_event_ids(bootstrap: str, topic: str) -> list[int]:
    """Every event id a consumer reads from the topic now, from each partition's log start to its end."""
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


def _output_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.strip()]


class ExactlyOnceModel:
    def __init__(self, broker: BrokerProcess, tmp: Path, seed: int,
                 in_process: Callable[[str, dict[str, object]], tuple[int, str]] | None = None) -> None:
        self.broker, self.tmp, self.rnd = broker, tmp, random.Random(seed)
        self.in_process = in_process
        self.table, self.ckpt = tmp / "table", tmp / "ckpt"
        self.saved_ckpt = tmp / "ckpt-saved"
        self.next_id = 0
        self.acked: set[int] = set()
        self.report = ModelReport()

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def settings(self, **extra: object) -> dict[str, object]:
        return {"source.bootstrap.servers": self.bootstrap, "source.topics": TOPIC, "sink.table.path": self.table,
                "sink.checkpoint.location": self.ckpt, "sink.app.id": APP, "group.mirror": "",
                "trigger": "available-now", "source.max.offsets.per.trigger": self.rnd.choice([40, 150, 1000]),
                "source.fail.on.data.loss": "false", **extra}

    def violation(self, text: str) -> None:
        self.report.violations.append(f"action {len(self.report.actions)} ({self.report.actions[-1]}): {text}")

    # --- what the table must hold ----------------------------------------------------------------------

    def table_ids(self) -> list[int]:
        return event_ids(self.table) if table_versions(self.table) else []

    def check_safe(self) -> None:
        rows = self.table_ids()
        dupes = sorted(i for i, n in Counter(rows).items() if n > 1)
        unknown = sorted(set(rows) - self.acked)
        if dupes:
            self.violation(f"{len(dupes)} event ids duplicated, e.g. {dupes[:5]}")
        if unknown:
            self.violation(f"{len(unknown)} rows never acknowledged, e.g. {unknown[:5]}")

    def check_complete(self) -> None:
        missing = sorted(set(readable_event_ids(self.bootstrap, TOPIC)) - set(self.table_ids()))
        if missing:
            self.violation(f"{len(missing)} readable records missing, e.g. {missing[:5]}")

    def job(self, name: str, settings: dict[str, object]) -> tuple[int, str]:
        """Run `pylog job NAME` to its end: (exit code, output). A real process, or with `in_process` (the long
        walk) the job's own `run` in this process's Spark session, which saves a JVM start per run."""
        if self.in_process is None:
            out, _ = (proc := run_job(name, settings)).communicate(timeout=400)
            return proc.returncode, out
        return self.in_process(name, settings)

    def expect_success(self, name: str, settings: dict[str, object]) -> None:
        code, out = self.job(name, settings)
        if code != 0:
            self.violation(f"{name} exited {code}: {out[-1500:]}")
        else:
            self.check_complete()

    def expect_refusal(self, name: str, settings: dict[str, object], words: str, tables: list[Path]) -> None:
        before = [table_versions(t) for t in tables]
        code, out = self.job(name, settings)
        lines = _output_lines(out)
        if code == 0:
            self.violation(f"expected a refusal ({words}), but the job exited 0: {out[-800:]}")
        elif words not in out:
            self.violation(f"refused without saying {words!r}: {out[-800:]}")
        elif len(lines) > 10:
            self.violation(f"the refusal took {len(lines)} lines: {out[-1500:]}")
        if [table_versions(t) for t in tables] != before:
            self.violation("a refused job changed a table")

    # --- actions ------------------------------------------------------------------------------------

    def produce(self) -> None:
        n = self.rnd.randint(20, 400)
        produce_events(self.bootstrap, TOPIC, self.next_id, n)
        self.acked.update(range(self.next_id, self.next_id + n))
        self.next_id += n

    def run(self) -> None:
        self.expect_success("stream_to_delta", self.settings())

    def _stage_reached(self, stage: str, before: tuple[int, int, int]) -> bool:
        return self._marks()[STAGES.index(stage)] > before[STAGES.index(stage)]

    def _marks(self) -> tuple[int, int, int]:
        planned = sum(1 for _ in self.ckpt.glob("gen-*/offsets/[0-9]*")) if self.ckpt.exists() else 0
        written = sum(1 for _ in self.table.rglob("*.parquet")) if self.table.exists() else 0
        return planned, written, table_versions(self.table)

    def _run_until(self, stage: str, then: Callable[[subprocess.Popen], None]) -> None:
        """Start the stream and, once it reaches `stage` of a batch (or at once if it finishes first), `then`."""
        self.produce()   # something for the run to do
        before = self._marks()
        proc = run_job("stream_to_delta", self.settings())
        deadline = time.monotonic() + 240
        while proc.poll() is None and not self._stage_reached(stage, before) and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is not None:   # finished before the stage: a normal run
            out, _ = proc.communicate()
            if proc.returncode != 0:
                self.violation(f"stream_to_delta exited {proc.returncode}: {out[-1500:]}")
            return
        then(proc)

    def _kill(self, stage: str) -> None:
        self._run_until(stage, kill)

    def kill_planned(self) -> None:
        self._kill("planned")

    def kill_written(self) -> None:
        self._kill("written")

    def kill_committed(self) -> None:
        self._kill("committed")

    def sigterm(self) -> None:
        def term(proc: subprocess.Popen) -> None:
            time.sleep(self.rnd.uniform(0, 1.0))
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            out, _ = proc.communicate(timeout=240)
            if proc.returncode not in (0, 128 + signal.SIGTERM):
                self.violation(f"SIGTERM: the job exited {proc.returncode}: {out[-1500:]}")

        self._run_until(self.rnd.choice(STAGES), term)

    def delete_checkpoint(self) -> None:
        shutil.rmtree(self.ckpt, ignore_errors=True)

    def save_checkpoint(self) -> None:
        if self.ckpt.exists():
            shutil.rmtree(self.saved_ckpt, ignore_errors=True)
            shutil.copytree(self.ckpt, self.saved_ckpt)

    def restore_old_checkpoint(self) -> None:
        """Put back an earlier copy of the checkpoint (a restored backup): the next run must trust the table."""
        if self.saved_ckpt.exists():
            shutil.rmtree(self.ckpt, ignore_errors=True)
            shutil.copytree(self.saved_ckpt, self.ckpt)
        self.run()

    def share_checkpoint(self) -> None:
        if not self.ckpt.exists():
            self.run()
            return
        other = self.tmp / "other-table"
        self.expect_refusal("stream_to_delta", self.settings(**{"sink.table.path": other, "sink.app.id": "other"}),
                            "cannot be used by app 'other'", [self.table, other])

    def rename_app(self) -> None:
        if not self.ckpt.exists():
            self.run()
            return
        self.expect_refusal("stream_to_delta", self.settings(**{"sink.app.id": "eo-renamed"}),
                            "cannot be used by app 'eo-renamed'", [self.table])

    def batch_load(self) -> None:
        self.expect_success("batch_load", self.settings())

    def reprocess_replace(self) -> None:
        self.expect_success("reprocess", {**self.settings(), "reprocess.mode": "replace"})

    def vacuum(self) -> None:
        if table_versions(self.table):
            DeltaTable(str(self.table)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)

    def vacuum_beside(self) -> None:
        """VACUUM RETAIN 0 HOURS while a batch's files are written but not committed (documented as unsafe):
        the run must finish, or stop naming the deleted files; never commit them."""
        def vacuum_then_wait(proc: subprocess.Popen) -> None:
            self.vacuum()
            out, _ = proc.communicate(timeout=400)
            if proc.returncode != 0 and "deleted before its commit" not in out:
                self.violation(f"beside VACUUM the job exited {proc.returncode}: {out[-1500:]}")

        if table_versions(self.table):
            self._run_until("written", vacuum_then_wait)
            self.check_readable_files()

    def check_readable_files(self) -> None:
        dt = DeltaTable(str(self.table))
        gone = [u for u in dt.file_uris() if not Path(u.removeprefix("file://")).exists()]
        if gone:
            self.violation(f"the table names {len(gone)} files that do not exist, e.g. {gone[0]}")

    def optimize(self) -> None:
        if table_versions(self.table):
            DeltaTable(str(self.table)).optimize.compact()

    def add_partitions(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        count = len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
        if count < 4:
            for f in admin.create_partitions([NewPartitions(TOPIC, count + 1)]).values():
                f.result()

    def recreate_topic(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for f in admin.delete_topics([TOPIC]).values():
            f.result()
        while TOPIC in admin.list_topics(timeout=10).topics:
            time.sleep(0.2)
        create_topic(self.bootstrap, TOPIC, partitions=self.rnd.randint(1, 3))

    def broker_kill(self) -> None:
        self.broker.kill()
        self.broker.start()

    def retention(self) -> None:
        """DeleteRecords up to a random offset of one partition (what retention does to unread records)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "model-retention"})
        try:
            parts = list(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
            p = self.rnd.choice(parts)
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        finally:
            c.close()
        if high > low:
            for f in admin.delete_records([TopicPartition(TOPIC, p, self.rnd.randint(low + 1, high))]).values():
                f.result()

    def rival_stream(self) -> None:
        """A second stream with the same app id and its own checkpoint: it takes the table over."""
        self.expect_success("stream_to_delta", self.settings(**{"sink.checkpoint.location": self.tmp / "ckpt-rival"}))

    # --- the walk -----------------------------------------------------------------------------------

    def step(self, action: str) -> None:
        self.report.actions.append(action)
        getattr(self, action.replace("-", "_"))()
        self.check_safe()

    def run_walk(self, actions: int, on_action: Callable[[int, str], None] = lambda i, a: None) -> ModelReport:
        create_topic(self.bootstrap, TOPIC, partitions=2)
        names = list(ACTIONS)
        first = [a for a in names if a != "produce"]
        self.rnd.shuffle(first)   # the first actions try each kind once (after some data), then any at random
        self.produce()
        for i in range(actions):
            if i < len(first):
                action = first[i]
            else:
                action = self.rnd.choices(names, weights=[ACTIONS[a] for a in names])[0]
            on_action(i, action)
            self.step(action)
            if self.report.violations:
                break
        if not self.report.violations:
            self.report.actions.append("final run")
            self.run()
            self.check_safe()
        return self.report


def in_process_runner(spark: object) -> Callable[[str, dict[str, object]], tuple[int, str]]:
    """Run a job's `run(cfg)` in this process (the session `spark` already started), as `pylog job` would, and
    return (0, log) or (1, the one line `pylog job` prints): for the long walk, where JVM starts dominate."""
    import importlib
    import io
    import logging

    from jobs.config import JobConfig
    from jobs.errors import root_cause

    def run(name: str, settings: dict[str, object]) -> tuple[int, str]:
        buffer = io.StringIO()
        handler = logging.StreamHandler(buffer)
        logging.getLogger().addHandler(handler)
        try:
            cfg = JobConfig.load(name, None, [f"{k}={v}" for k, v in settings.items()])
            code = int(importlib.import_module(f"jobs.{name}").run(cfg))
            return code, buffer.getvalue()
        except Exception as e:  # noqa: BLE001 - what `pylog job` turns into its one line
            return 1, f"pylog job: error: job {name} failed: {root_cause(e)}"
        finally:
            logging.getLogger().removeHandler(handler)
    return run
