"""Cluster-mode benchmark (issue 11): replication cost and failover, pylog against Apache Kafka 3.9 (ZooKeeper mode).

For every system in --brokers, alternating system by system within each repetition, on fresh clusters
(a local ZooKeeper plus brokers, peers/zk_cluster.py; Kafka from the jars `make test` fetches, pylog as
`python -m pylog broker --set zookeeper.connect=... --set broker.id=N ...`):

1. throughput: one confluent-kafka producer process (linger.ms 5, batch.size 1 MB, --records of --size B,
   --partitions partitions) against one broker at acks=1, then against three brokers, replication
   factor 3, min.insync.replicas 2: the same producer at acks=all (the issue's figure: only acks
   changes, as in Kafka's 2014 replication benchmark the 0.6 target is set against), and at acks=all
   with idempotence; records/s of each and their ratios to the first (target >= 0.6). The clock starts after one delivered warm-up record: connections, metadata and the
   idempotent producer's id (librdkafka waits 500 ms before asking for one) are not throughput.
2. failover: on the three brokers, an acks=all idempotent producer sends --rate records/s to a fresh
   one-partition topic; SIGKILL the partition's leader; seconds from the kill to the acknowledgement of
   the first record produced after it (target <= zookeeper.session.timeout.ms + 2 s), and when a
   surviving broker's Metadata first names a new leader. Then the killed broker is restarted, the
   partition read back, and every acknowledged record must be there exactly once (lost and duplicated
   counts; records whose delivery failed are counted too).
3. controlled shutdown: the same producer on another fresh topic; SIGTERM the leader
   (controlled.shutdown.enable=true); seconds until a surviving broker's Metadata names a new leader
   (target <= 1 s), seconds until the process exited, and delivery errors the producer saw (target 0),
   and the same read-back check.

Every figure: median, min and max over --reps; JSON to bench/results/cluster_bench-<date>.json (or --out)
with the machine and the load average before and after every repetition.

Usage:
  .venv/bin/python bench/cluster_bench.py --brokers kafka,pylog --reps 3
  .venv/bin/python bench/cluster_bench.py --brokers kafka --reps 1 --records 100000   # smoke, about 2 minutes
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

from pylog.launch.process import BrokerProcess, ServerProcess  # noqa: E402
from peers.kafka import KafkaZkBroker  # noqa: E402
from peers.zk_cluster import ZkCluster  # noqa: E402

SYSTEMS = ("kafka", "pylog")
SEQ_DIGITS = 10


def make_cluster(system: str, workdir: Path, size: int, settings: dict[str, object],
                 session_timeout_ms: int) -> ZkCluster:
    """A ZooKeeper-mode cluster of `size` brokers of `system` (not started)."""
    factories: dict[str, Callable[[Path, dict[str, object]], ServerProcess]] = {
        "kafka": lambda wd, s: KafkaZkBroker(wd, s, heap="512m"),
        "pylog": lambda wd, s: BrokerProcess(wd, settings=s),
    }
    return ZkCluster(workdir, factories[system], size, settings, session_timeout_ms, chroot=f"/{system}")


def value(seq: int, size: int) -> bytes:
    return str(seq).zfill(SEQ_DIGITS).encode().ljust(size, b".")


# --------------------------------------------------------------------------- throughput (client process)

def worker_produce(bootstrap: str, topic: str, count: int, size: int, acks: str, idempotent: bool) -> dict[str, Any]:
    """A tight produce() loop in a fresh process, timed from the first send to the end of flush()."""
    from confluent_kafka import KafkaError, Message, Producer

    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1024 * 1024, "acks": acks,
                  "enable.idempotence": idempotent, "compression.type": "none",
                  "delivery.report.only.error": True, "on_delivery": on_error})
    p.list_topics(topic, timeout=10)   # connect and learn the leaders before the clock starts
    # and, for an idempotent producer, get its producer id: librdkafka's id state machine first waits 500 ms
    # for a broker connection (its PID timer starts with the producer), which would otherwise stall the first
    # half second of a 3-second run; a throughput figure is about the brokers, so one record goes before the clock
    p.produce(topic, b"warm-up")
    if p.flush(30) != 0:
        errors.append("the warm-up record was not delivered within 30 s")
    payload = os.urandom(size)
    started = time.perf_counter()
    full_s = _common.produce_all(p, topic, payload, count)   # waiting for room in the queue: the brokers were the limit
    remaining = p.flush(300)
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": elapsed, "records": count, "errors": len(errors) + remaining,  # the warm-up record not counted
            "first_error": errors[0] if errors else None, "records_per_s": count / elapsed,
            "client_cpu_s": usage.ru_utime + usage.ru_stime, "queue_full_s": full_s}


def call_worker(spec: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"failed": f"producer process timed out after {timeout_s:.0f}s"}
    if out.returncode != 0:
        return {"failed": (out.stderr or out.stdout).strip()[-2000:]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def alternating(systems: list[str], reps: int, prefix: str,
                one: Callable[[str, int, Path], dict[str, Any]]) -> list[dict[str, Any]]:
    """`one(system, rep, workdir)` for every system in each repetition, the order reversed every other repetition
    (A B, B A, ...), under a temporary folder; each run gets the load average after it and is printed as JSON."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for rep in range(reps):
            for system in (systems if rep % 2 == 0 else list(reversed(systems))):
                run = one(system, rep, Path(tmp))
                run["loadavg"] = os.getloadavg()
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "produce"}), flush=True)
    return runs


def broker_cpu(cluster: ZkCluster) -> dict[int, float]:
    """User + system CPU seconds so far of every running broker process, by broker id."""
    out = {}
    for i in cluster.alive():
        proc = cluster.broker(i).proc
        if proc is not None:
            try:
                out[i] = _common.cpu_seconds(proc.pid)
            except OSError:   # it ended in between
                continue
    return out


def throughput(cluster: ZkCluster, name: str, args: argparse.Namespace, acks: str, idempotent: bool) -> dict[str, Any]:
    rf = min(cluster.size, 3)
    _common.create_topic(cluster.bootstrap, name, args.partitions, replication_factor=rf)
    cluster.wait_in_sync(name, args.partitions)
    before = broker_cpu(cluster)
    r = call_worker({"bootstrap": cluster.bootstrap, "topic": name, "count": args.records, "size": args.size,
                     "acks": acks, "idempotent": idempotent})
    after = broker_cpu(cluster)
    # CPU of every broker process (all its threads: the JVM's too) over the producer process's whole life,
    # which includes its connect and metadata; per record it is the cost of storing (and replicating) one
    cpu = {i: after[i] - before[i] for i in before if i in after}
    r.update(brokers=cluster.size, acks=acks, idempotent=idempotent, replication_factor=rf,
             broker_cpu_s=cpu, broker_cpu_us_per_record=sum(cpu.values()) / args.records * 1e6)
    _common.delete_topic(cluster.bootstrap, name)
    return r


# --------------------------------------------------------------------------- failover (producer thread)

class ProducerLoop:
    """An acks=all idempotent producer sending `rate` records/s from a thread, each value carrying its
    sequence number; records the monotonic time of every send, acknowledgement and failure."""

    def __init__(self, bootstrap: str, topic: str, rate: int, size: int, message_timeout_ms: int,
                 request_timeout_ms: int) -> None:
        from confluent_kafka import Producer

        self.topic, self.rate, self.size = topic, rate, size
        self.sent: dict[int, float] = {}
        self.acked: dict[int, float] = {}
        self.failed: dict[int, str] = {}
        self.client_errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()   # the producer thread writes sent/acked while the main thread reads them
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1,
            "message.timeout.ms": message_timeout_ms, "request.timeout.ms": request_timeout_ms,
            "error_cb": lambda err: self.client_errors.append(str(err)), "log_level": 0})
        self.producer.list_topics(topic, timeout=10)
        self.thread = threading.Thread(target=self._run, name="producer-loop", daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        seq = int(msg.value()[:SEQ_DIGITS])
        with self._lock:
            if err is None:
                self.acked[seq] = time.monotonic()
            else:
                self.failed[seq] = str(err)

    def _run(self) -> None:
        started = time.monotonic()
        seq = 0
        while not self._stop.is_set():
            wait = started + seq / self.rate - time.monotonic()
            if wait > 0:
                self.producer.poll(wait)
                continue
            now = time.monotonic()   # before the call: a record "sent after t" was handed over after t
            try:
                self.producer.produce(self.topic, value(seq, self.size), on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.01)
                continue
            with self._lock:
                self.sent[seq] = now
            seq += 1
            self.producer.poll(0)

    def start(self) -> "ProducerLoop":
        self.thread.start()
        return self

    def first_ack_after(self, t: float) -> float | None:
        """Seconds from `t` to the acknowledgement of the first record sent after `t`, or None (not yet)."""
        with self._lock:
            acks = [self.acked[s] for s, sent in self.sent.items() if sent > t and s in self.acked]
        return min(acks) - t if acks else None

    def longest_ack_gap(self, start: float, end: float) -> float | None:
        """The longest time between two consecutive acknowledgements in [start, end] (its ends included):
        how long the client saw no progress around a failover."""
        with self._lock:
            times = sorted(a for a in self.acked.values() if start <= a <= end)
        points = [start] + times + [end]
        return max(b - a for a, b in zip(points, points[1:])) if times else None

    def wait_steady(self, records: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: only {len(self.acked)} of {records} records acknowledged "
                                   f"in {timeout:.0f}s (failed: {list(self.failed.values())[:3]})")
            time.sleep(0.05)

    def stop(self, flush_timeout: float) -> int:
        """Stop sending, wait for the outstanding records; returns how many never got a delivery report."""
        self._stop.set()
        self.thread.join()
        return int(self.producer.flush(flush_timeout))


def read_back(cluster: ZkCluster, topic: str, timeout: float = 60.0) -> Counter[int]:
    """How many times each sequence number is in the partition, read from offset 0 to the high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"verify-{topic}",
                  "enable.auto.commit": False, "log_level": 0})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        seen: Counter[int] = Counter()
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        last, deadline = -1, time.monotonic() + timeout
        while last < high - 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read to offset {last} of {high} in {timeout:.0f}s")
            for m in c.consume(10000, 1.0):
                payload, offset = m.value(), m.offset()
                if m.error() is None and payload is not None and offset is not None:
                    seen[int(payload[:SEQ_DIGITS])] += 1
                    last = max(last, offset)
        return seen
    finally:
        c.close()


def check(loop: ProducerLoop, seen: Counter[int], unreported: int) -> dict[str, Any]:
    acked = set(loop.acked)
    return {"sent": len(loop.sent), "acked": len(acked), "failed": len(loop.failed), "unreported": unreported,
            "first_failure": next(iter(loop.failed.values()), None),
            "lost": len(acked - set(seen)), "duplicated": sum(1 for s in acked if seen[s] > 1),
            "failed_but_stored": sum(1 for s in loop.failed if seen[s]),
            "client_errors": len(loop.client_errors), "first_client_error": next(iter(loop.client_errors), None)}


def new_leader_via(cluster: ZkCluster, topic: str, old: int) -> int:
    """The leader as a surviving broker sees it (-1: none yet or no answer)."""
    for via in cluster.alive():
        if via != old:
            try:
                return cluster.leader(topic, via=via)
            except Exception:  # noqa: BLE001 - a broker that cannot answer this moment: ask the next
                continue
    return -1


def failover(cluster: ZkCluster, topic: str, args: argparse.Namespace, controlled: bool) -> dict[str, Any]:
    """SIGKILL (or SIGTERM when `controlled`) the leader of `topic`'s only partition under a steady producer."""
    _common.create_topic(cluster.bootstrap, topic, 1, replication_factor=3)
    cluster.wait_in_sync(topic, 1)
    loop = ProducerLoop(cluster.bootstrap, topic, args.rate, args.size, args.message_timeout_ms,
                        args.request_timeout_ms).start()
    try:
        loop.wait_steady(args.rate)   # about a second of acknowledged records first
        leader, controller = cluster.leader(topic), cluster.controller()
        out: dict[str, Any] = {"killed": leader, "controller": controller, "signal": "TERM" if controlled else "KILL"}
        t0 = time.monotonic()
        # wall clock of the signal, as the brokers' logs print it (local time), to line them up with it (--keep)
        out["signal_at"] = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        if controlled:
            cluster.terminate(leader)
        else:
            cluster.kill(leader)
        deadline = t0 + args.session_timeout_ms / 1000 + args.failover_timeout
        elected = first_ack = exited = None
        while time.monotonic() < deadline and (elected is None or first_ack is None or exited is None):
            if elected is None and new_leader_via(cluster, topic, leader) not in (-1, leader):
                elected = time.monotonic() - t0
            first_ack = first_ack if first_ack is not None else loop.first_ack_after(t0)
            if exited is None and not cluster.broker(leader).alive():
                exited = time.monotonic() - t0
            time.sleep(0.01)
        out.update(new_leader_s=elected, first_ack_s=first_ack, exited_s=exited,
                   new_leader=new_leader_via(cluster, topic, leader))
        time.sleep(1.0)   # keep producing on the new leader for a while
        out["longest_ack_gap_s"] = loop.longest_ack_gap(t0, time.monotonic())
    finally:
        unreported = loop.stop(args.message_timeout_ms / 1000 + 5)
    if controlled:
        out["exit_code"] = cluster.wait_exit(leader)
    cluster.restart(leader)
    out.update(check(loop, read_back(cluster, topic), unreported))
    return out


# --------------------------------------------------------------------------- orchestration

def run_system(system: str, rep: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    # the same settings for both systems: peers/kafka.py's test defaults (4 offsets partitions) are overridden
    # with both systems' own default, so each controller handles the same number of partitions
    base = {"zookeeper.session.timeout.ms": args.session_timeout_ms, "replica.lag.time.max.ms": args.replica_lag_ms,
            "controlled.shutdown.enable": "true", "offsets.topic.num.partitions": args.offsets_partitions}
    out: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    single = make_cluster(system, workdir / f"{system}-{rep}-single", 1,
                          {**base, "default.replication.factor": 1, "min.insync.replicas": 1},
                          args.session_timeout_ms)
    with single:
        out["single_acks1"] = throughput(single, f"tp-single-{rep}", args, "1", False)
    trio = make_cluster(system, workdir / f"{system}-{rep}-trio", 3,
                        {**base, "default.replication.factor": 3, "min.insync.replicas": 2,
                         "offsets.topic.replication.factor": 3}, args.session_timeout_ms)
    with trio:
        out["trio_acks_all_plain"] = throughput(trio, f"tp-trio-plain-{rep}", args, "all", False)
        out["trio_acks_all"] = throughput(trio, f"tp-trio-{rep}", args, "all", True)
        out["failover_kill"] = failover(trio, f"failover-{rep}", args, controlled=False)
        out["controlled_shutdown"] = failover(trio, f"controlled-{rep}", args, controlled=True)
    single_rate = out["single_acks1"].get("records_per_s")
    plain_rate = out["trio_acks_all_plain"].get("records_per_s")
    trio_rate = out["trio_acks_all"].get("records_per_s")
    out["ratio"] = plain_rate / single_rate if single_rate and plain_rate else None
    out["ratio_idempotent"] = trio_rate / single_rate if single_rate and trio_rate else None
    out["loadavg_after"] = os.getloadavg()
    return out


def spread(values: list[float | None]) -> dict[str, float] | None:
    vals = [v for v in values if v is not None]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)} if vals else None


def summarize(runs: list[dict[str, Any]], session_timeout_ms: int) -> dict[str, Any]:
    ok = [r for r in runs if "failed" not in r]

    def total(phase: str, key: str) -> int:
        return sum(int(r[phase].get(key, 0)) for r in ok)
    return {
        "reps_ok": len(ok), "reps_failed": len(runs) - len(ok),
        "single_acks1_rec_s": spread([r["single_acks1"].get("records_per_s") for r in ok]),
        "trio_acks_all_plain_rec_s": spread([r["trio_acks_all_plain"].get("records_per_s") for r in ok]),
        "trio_acks_all_rec_s": spread([r["trio_acks_all"].get("records_per_s") for r in ok]),
        "ratio": spread([r["ratio"] for r in ok]),
        "ratio_idempotent": spread([r["ratio_idempotent"] for r in ok]),
        "failover_first_ack_s": spread([r["failover_kill"]["first_ack_s"] for r in ok]),
        "failover_new_leader_s": spread([r["failover_kill"]["new_leader_s"] for r in ok]),
        "failover_target_s": session_timeout_ms / 1000 + 2,
        "failover_no_ack": sum(1 for r in ok if r["failover_kill"]["first_ack_s"] is None),
        "controlled_no_new_leader": sum(1 for r in ok if r["controlled_shutdown"]["new_leader_s"] is None),
        "failover_lost": total("failover_kill", "lost"), "failover_duplicated": total("failover_kill", "duplicated"),
        "failover_failed": total("failover_kill", "failed"),
        "single_cpu_us_per_record": spread([r["single_acks1"].get("broker_cpu_us_per_record") for r in ok]),
        "trio_plain_cpu_us_per_record": spread([r["trio_acks_all_plain"].get("broker_cpu_us_per_record") for r in ok]),
        "trio_cpu_us_per_record": spread([r["trio_acks_all"].get("broker_cpu_us_per_record") for r in ok]),
        "controlled_new_leader_s": spread([r["controlled_shutdown"]["new_leader_s"] for r in ok]),
        "controlled_first_ack_s": spread([r["controlled_shutdown"]["first_ack_s"] for r in ok]),
        "controlled_longest_ack_gap_s": spread([r["controlled_shutdown"].get("longest_ack_gap_s") for r in ok]),
        "failover_longest_ack_gap_s": spread([r["failover_kill"].get("longest_ack_gap_s") for r in ok]),
        "controlled_exit_s": spread([r["controlled_shutdown"]["exited_s"] for r in ok]),
        "controlled_failed": total("controlled_shutdown", "failed"),
        "controlled_lost": total("controlled_shutdown", "lost"),
        "controlled_duplicated": total("controlled_shutdown", "duplicated"),
        "controlled_client_errors": total("controlled_shutdown", "client_errors"),
    }


def print_table(summary: dict[str, dict[str, Any]]) -> None:
    def fmt(s: dict[str, float] | None, unit: str = "", digits: int = 2) -> str:
        if s is None:
            return "-"
        return f"{s['median']:,.{digits}f}{unit} ({s['min']:,.{digits}f}-{s['max']:,.{digits}f})"
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [("1 broker, acks=1, rec/s", lambda s: fmt(s["single_acks1_rec_s"], digits=0)),
            ("3 brokers rf 3, acks=all (the same producer), rec/s", lambda s: fmt(s["trio_acks_all_plain_rec_s"], digits=0)),
            ("ratio (target >= 0.6)", lambda s: fmt(s["ratio"])),
            ("3 brokers rf 3, acks=all idempotent, rec/s", lambda s: fmt(s["trio_acks_all_rec_s"], digits=0)),
            ("ratio, idempotent", lambda s: fmt(s["ratio_idempotent"])),
            ("broker CPU per record, 1 broker acks=1, us", lambda s: fmt(s["single_cpu_us_per_record"], digits=1)),
            ("broker CPU per record, 3 brokers acks=all (all brokers), us",
             lambda s: fmt(s["trio_plain_cpu_us_per_record"], digits=1)),
            ("broker CPU per record, 3 brokers acks=all idempotent (all brokers), us",
             lambda s: fmt(s["trio_cpu_us_per_record"], digits=1)),
            ("SIGKILL leader -> first ack, s", lambda s: fmt(s["failover_first_ack_s"], " s")
             + f" (target <= {s['failover_target_s']:g})"),
            ("SIGKILL leader -> new leader in Metadata, s", lambda s: fmt(s["failover_new_leader_s"], " s")),
            ("SIGKILL: longest time without an ack, s", lambda s: fmt(s["failover_longest_ack_gap_s"], " s")),
            ("SIGKILL: lost / duplicated / failed records; reps with no ack in time", lambda s: f"{s['failover_lost']}"
             f" / {s['failover_duplicated']} / {s['failover_failed']}; {s['failover_no_ack']}"),
            ("SIGTERM leader -> new leader, s (target <= 1)", lambda s: fmt(s["controlled_new_leader_s"], " s")),
            ("SIGTERM leader -> first ack of a record sent after it, s",
             lambda s: fmt(s["controlled_first_ack_s"], " s")),
            ("SIGTERM: longest time without an ack, s", lambda s: fmt(s["controlled_longest_ack_gap_s"], " s")),
            ("SIGTERM: reps with no new leader in time", lambda s: str(s["controlled_no_new_leader"])),
            ("SIGTERM -> process exited, s", lambda s: fmt(s["controlled_exit_s"], " s")),
            ("SIGTERM: delivery errors / lost / duplicated", lambda s: f"{s['controlled_failed']} / "
             f"{s['controlled_lost']} / {s['controlled_duplicated']}"),
            ("SIGTERM: librdkafka error_cb events (transport)", lambda s: str(s["controlled_client_errors"]))]
    systems = list(summary)
    print("| figure (median (min-max)) | " + " | ".join(systems) + " |")
    print("|---|" + "---:|" * len(systems))
    for label, cell in rows:
        cells = [cell(summary[s]) if summary[s]["reps_ok"] else "failed" for s in systems]
        print(f"| {label} | " + " | ".join(cells) + " |")


def machine() -> dict[str, Any]:
    import confluent_kafka

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_common.REPO, capture_output=True,
                            text=True).stdout.strip()
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
            "kafka_jar": sorted(p.name for p in (_common.REPO / ".cache/jars/kafka-broker").glob("kafka_2.13-*.jar")),
            "pylog_commit": commit}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--brokers", default="kafka,pylog", help="comma list out of kafka,pylog (alternated per rep)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=3_000_000,
                    help="records per throughput measurement (300,000 at acks=1 last 0.15 s: start-up costs dominated)")
    ap.add_argument("--size", type=int, default=100, help="record value bytes")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the throughput topic")
    ap.add_argument("--rate", type=int, default=1000, help="records/s of the failover producer")
    ap.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--offsets-partitions", type=int, default=50,
                    help="offsets.topic.num.partitions of both systems (__consumer_offsets exists from the first read-back)")
    ap.add_argument("--replica-lag-ms", type=int, default=10000, help="replica.lag.time.max.ms")
    ap.add_argument("--message-timeout-ms", type=int, default=10000, help="the failover producer's message.timeout.ms")
    ap.add_argument("--request-timeout-ms", type=int, default=3000, help="the failover producer's request.timeout.ms")
    ap.add_argument("--failover-timeout", type=float, default=30.0, help="seconds beyond the session timeout to wait")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the clusters' directories")
    ap.add_argument("--keep", action="store_true", help="keep the clusters' directories and logs after the run")
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default bench/results/cluster_bench-<date>.json)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker_produce(**json.loads(args.worker))))
        return 0
    systems = [s.strip() for s in args.brokers.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown system(s) {', '.join(sorted(unknown))}: choose from {', '.join(SYSTEMS)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)   # ZooKeeper's readiness probe retries noisily
    # SIGTERM ends the run through the finally blocks and atexit, so every cluster is torn down
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out_path = args.out or _common.REPO / "bench" / "results" / f"cluster_bench-{stamp}.json"
    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=args.workdir))
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    started = time.monotonic()
    try:
        for rep in range(args.reps):
            for system in systems:
                print(f"rep {rep + 1}/{args.reps}: {system} ...", file=sys.stderr, flush=True)
                try:
                    r = run_system(system, rep, args, workdir)
                except Exception as e:  # noqa: BLE001 - one system failing (pylog before cluster mode) must not end the run
                    r = {"failed": f"{type(e).__name__}: {e}"[:3000]}
                    print(f"  {system} failed: {r['failed'][:500]} (--keep keeps its logs)", file=sys.stderr, flush=True)
                runs[system].append(r)
    finally:   # the clusters are closed by now (with-blocks, atexit); their directories go unless --keep
        if args.keep:
            print(f"cluster directories and logs kept under {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summary = {s: summarize(runs[s], args.session_timeout_ms) for s in systems}
    doc = {"benchmark": "cluster_bench", "date": stamp, "argv": sys.argv, "wall_s": time.monotonic() - started,
           "machine": machine(), "settings": {k: v for k, v in vars(args).items() if k != "worker"},
           "summary": summary, "runs": runs}
    _common.write_json(out_path, json.loads(json.dumps(doc, default=str)))
    print_table(summary)
    print(f"results written to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
