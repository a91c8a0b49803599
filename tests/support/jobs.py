"""Running `pylog job ...` as real processes in tests, and checking a Delta table against the topic."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from confluent_kafka import Producer
from deltalake import DeltaTable

from connectors.offset_manager import OffsetManager, end_offsets
from connectors.table_location import TableFiles, TableLocation

REPO = Path(__file__).resolve().parents[2]

# JVM options for the Spark driver of each `pylog job` a test starts (spark-submit reads SPARK_SUBMIT_OPTS):
# a job here is a short-lived JVM on a few thousand records, so the C1 compiler alone and the serial
# collector (what tests/support/kafka_tools.py gives Kafka's tools) save about a third of its CPU time,
# most of it JIT work that never pays back. Same Java semantics; `make demo` (tests/e2e/test_demo.py)
# still runs its jobs with the JVM's defaults.
JOB_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def produce_events(bootstrap: str, topic: str, start: int, count: int, timestamp_of=None,
                   conf: dict[str, object] | None = None) -> None:
    """Events `start`..`start + count - 1` as JSON values keyed k<i>, every one acknowledged (a delivery error
    fails the test: flush() counts a failed record as done)."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **(conf or {}),
                  "on_delivery": lambda err, _msg: err and errors.append(str(err))})
    for i in range(start, start + count):
        kw = {"timestamp": timestamp_of(i)} if timestamp_of else {}
        p.produce(topic, key=f"k{i}".encode(), value=json.dumps({"event_id": str(i), "user_id": "u", "type": "t",
                                                                    "amount": None, "ts": i}).encode(), **kw)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert not errors, f"{len(errors)} records not delivered: {errors[0]}"


def stream_settings(bootstrap: str, tmp: Path, app_id: str, per_trigger: int, **extra: object) -> dict[str, object]:
    """Settings of a `stream_to_delta` run over topic `events` into tmp/table with checkpoint tmp/ckpt."""
    return {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp / "table",
            "sink.checkpoint.location": tmp / "ckpt", "sink.app.id": app_id, "group.mirror": "",
            "trigger": "available-now", "source.max.offsets.per.trigger": per_trigger, **extra}


def run_job(name: str, settings: dict[str, object], env: dict[str, str] | None = None,
            cwd: Path = REPO, output: Path | None = None) -> subprocess.Popen:
    """Start `pylog job NAME`; its output is piped (read it with `finish`), or appended to `output` for a
    long-running job whose output nobody reads until it ends (a full pipe would block it)."""
    cmd = [sys.executable, "-m", "pylog", "job", name]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    jvm = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), JOB_JVM_OPTS]))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": jvm, **(env or {})}
    if output is None:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    with open(output, "ab") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def job_runs(name: str, settings: dict[str, object]) -> list[dict]:
    """The runs `pylog job status NAME --json` shows for a job with these settings, newest first."""
    cmd = [sys.executable, "-m", "pylog", "job", "status", name, "--json", "--last", "50"]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise
    if proc.returncode != 0:
        lines = [ln for ln in out.splitlines() if not ln.lstrip().startswith("at ")]
        raise AssertionError(f"job exited with {proc.returncode}:\n" + "\n".join(lines[-80:]))
    return out


def kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def kill_loop(start: Callable[[], subprocess.Popen], table: Path | Callable[[], int], rnd: random.Random, kills: int,
              wanted: int, max_pause_s: float, when_finished: Callable[[], None]) -> int:
    """Start the job again and again and SIGKILL it at a random moment (0..max_pause_s) after its next commit
    (a new Delta version of `table`, or a higher count from `table` when it is a function), until `wanted`
    kills; a run that finishes first gets more input from `when_finished`."""
    progress = table if callable(table) else (lambda: table_versions(table))
    while kills < wanted:
        before = progress()
        proc = start()
        deadline = time.monotonic() + 180
        while proc.poll() is None and progress() <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        try:                               # the random moment, unless the run finishes first
            proc.wait(rnd.uniform(0.0, max_pause_s))
        except subprocess.TimeoutExpired:
            kill(proc)
            kills += 1
        else:
            proc.communicate()
            when_finished()
    return kills


def driver_jvm_archives(proc: subprocess.Popen) -> list[str]:
    """The class-data archives (.jsa) the Spark driver JVM under the job process `proc` has mapped (jobs/class_archive.py)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            children.setdefault(int(stat[stat.rfind(")") + 2:].split()[1]), []).append(int(entry.name))
        except (OSError, ValueError):
            continue
    todo, found = [proc.pid], set()
    while todo:
        pid = todo.pop()
        try:
            if (Path(f"/proc/{pid}/exe").resolve().name == "java"):
                found |= {ln.split()[-1] for ln in Path(f"/proc/{pid}/maps").read_text().splitlines() if ln.endswith(".jsa")}
        except OSError:
            pass
        todo += children.get(pid, [])
    return sorted(found)


def table_versions(path: Path | TableLocation) -> int:
    if isinstance(path, TableLocation):
        return sum(1 for n in TableFiles(path).names("_delta_log") if n.endswith(".json"))
    log = path / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


def assert_exactly_once(table: Path | TableLocation, app_id: str, bootstrap: str, topic: str, expected: int) -> None:
    t = TableLocation.of(table).delta().to_pyarrow_table(columns=["topic", "partition", "offset"])
    keys = list(zip(t.column("topic").to_pylist(), t.column("partition").to_pylist(), t.column("offset").to_pylist()))
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} duplicated records"
    ends = end_offsets(bootstrap, [topic])
    produced = {(t, p, o) for (t, p), end in ends.items() for o in range(end)}
    assert set(keys) == produced, f"missing {len(produced - set(keys))}, unexpected {len(set(keys) - produced)}"
    assert len(keys) == expected
    assert OffsetManager(TableLocation.of(table), app_id).committed() == ends




def event_ids(table: Path) -> list[int]:
    """The `event_id` of every row (a column with value.schema, else inside the raw JSON value)."""
    dt = DeltaTable(str(table))
    if "event_id" in dt.schema().to_arrow().names:
        return sorted(int(v) for v in dt.to_pyarrow_table(columns=["event_id"]).column("event_id").to_pylist())
    t = dt.to_pyarrow_table(columns=["value"])
    return sorted(int(json.loads(v)["event_id"]) for v in t.column("value").to_pylist())


class MaintainBeside:
    """`pylog job maintain` run `max_runs` times, one after the other, on a table while a test's jobs write it
    (a thread; each run a real process, started once the table exists). VACUUM keeps its default retention:
    files a running writer has not committed yet stay."""

    def __init__(self, table: Path, max_runs: int = 1, pause_s: float = 1.0) -> None:
        import threading

        self.table, self.max_runs, self.pause_s = table, max_runs, pause_s
        self.runs: list[tuple[int, str]] = []   # (exit code, output) of each finished run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="maintain-beside", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set() and len(self.runs) < self.max_runs:
            if not (self.table / "_delta_log").exists():
                self._stop.wait(0.5)
                continue
            proc = run_job("maintain", {"sink.table.path": self.table})
            while proc.poll() is None and not self._stop.is_set():
                self._stop.wait(0.2)
            if proc.poll() is None:   # the test is done: this run is not counted
                kill(proc)
                return
            self.runs.append((proc.returncode, proc.communicate()[0]))
            self._stop.wait(self.pause_s)

    def __enter__(self) -> "MaintainBeside":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def succeeded(self) -> int:
        """How many runs finished with exit code 0; a failed run fails the test with its output."""
        for code, out in self.runs:
            assert code == 0, f"pylog job maintain failed beside the writer:\n{out[-3000:]}"
        return len(self.runs)
