"""Where a cluster's produce time goes (issue 11): broker CPU by role, replication timers, py-spy stacks.

One cluster of --cluster-size brokers (pylog or Apache Kafka, ZooKeeper mode, the settings of
bench/cluster_bench.py's three-broker phase), one topic of --partitions partitions at replication factor
min(size, 3), one producer process (cluster_bench's: linger.ms 5, batch.size 1 MB, --acks, idempotent
when acks=all) sending --records of --size bytes, per repetition on a fresh topic:

- CPU seconds of every broker process over the produce, and per record, with the partitions it leads
  (with one partition the leader's and the followers' costs come apart);
- with --probe (pylog only): brokers run under bench/_replication_probe.py, which times the follower's
  fetch rounds (round trip, append, bytes per response), the leader's follower fetches (long polls and
  their waits) and acks=all (append to release); the deltas of its counters over the produce;
- with --pyspy (pylog only): `py-spy record` on every broker during the produce; the top functions by
  own samples and by inclusive samples, per broker; the raw collapsed stacks stay in --stacks-dir.
Probe and py-spy both cost CPU: their runs' throughput is not a benchmark figure (cluster_bench is).

Usage:
  .venv/bin/python bench/cluster_profile.py --system pylog --partitions 1 --probe
  .venv/bin/python bench/cluster_profile.py --system pylog --partitions 1 --pyspy --stacks-dir /tmp/stacks
  .venv/bin/python bench/cluster_profile.py --system kafka --partitions 1
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import cluster_bench  # noqa: E402

from pylog.launch.process import BrokerProcess, ServerProcess  # noqa: E402
from peers.kafka import KafkaZkBroker  # noqa: E402
from peers.zk_cluster import ZkCluster  # noqa: E402

PROBE = Path(__file__).resolve().parent / "_replication_probe.py"


class ProbedBroker(BrokerProcess):
    """pylog's broker under bench/_replication_probe.py (its counters go to `probe_dir`)."""

    def __init__(self, data_dir: Path, settings: dict[str, object], probe_dir: Path, recheck: bool) -> None:
        super().__init__(data_dir, settings=settings)
        self.probe_dir = probe_dir
        self.recheck = recheck

    def command(self) -> list[str]:
        return ([sys.executable, str(PROBE), str(self.probe_dir)] + (["--recheck"] if self.recheck else [])
                + super().command())


def make_cluster(args: argparse.Namespace, workdir: Path, probe_dir: Path) -> ZkCluster:
    settings: dict[str, object] = {
        "zookeeper.session.timeout.ms": args.session_timeout_ms, "replica.lag.time.max.ms": args.replica_lag_ms,
        "controlled.shutdown.enable": "true", "default.replication.factor": min(args.cluster_size, 3),
        "min.insync.replicas": min(args.cluster_size, 2), "offsets.topic.replication.factor": min(args.cluster_size, 3)}

    def factory(wd: Path, s: dict[str, object]) -> ServerProcess:
        if args.system == "kafka":
            return KafkaZkBroker(wd, s, heap="512m")
        if args.probe or args.recheck:
            return ProbedBroker(wd, s, probe_dir, args.recheck)
        return BrokerProcess(wd, settings=s)
    return ZkCluster(workdir, factory, args.cluster_size, settings, args.session_timeout_ms, chroot=f"/{args.system}")


def probe_snapshot(probe_dir: Path, pid: int) -> dict[str, Any] | None:
    path = probe_dir / f"probe-{pid}.json"
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc
    except (OSError, ValueError):
        return None


def probe_delta(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    counts = {k: after["counts"][k] - before["counts"].get(k, 0) for k in after["counts"]}
    timers = {}
    for k, t in after["timers"].items():
        b = before["timers"].get(k, {"count": 0, "total_ms": 0.0, "hist": [0] * len(t["hist"])})
        n = t["count"] - b["count"]
        hist = [x - y for x, y in zip(t["hist"], b["hist"])]
        timers[k] = {"count": n, "mean_ms": (t["total_ms"] - b["total_ms"]) / n if n else None,
                     "hist": {f"<={edge:g}ms": c for edge, c in zip(after["buckets_ms"], hist) if c}}
    return {"counts": counts, "timers": timers}


def start_pyspy(pid: int, out: Path, rate: int) -> subprocess.Popen[bytes]:
    pyspy = Path(sys.executable).parent / "py-spy"
    if not pyspy.exists():
        raise RuntimeError(f"py-spy is not installed next to {sys.executable} (pip install py-spy)")
    return subprocess.Popen([str(pyspy), "record", "-p", str(pid), "-r", str(rate), "-f", "raw", "-o", str(out),
                             "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop_pyspy(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)   # py-spy writes its file on Ctrl-C
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def top_functions(collapsed: Path, n: int) -> dict[str, Any]:
    """Top `n` frames by own samples and by inclusive samples of a py-spy raw (collapsed) file."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    if not collapsed.exists():
        return {"samples": 0}
    for line in collapsed.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        total += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for f in set(frames):
            inclusive[f] += count
    pct = (lambda c: round(100.0 * c / total, 1)) if total else (lambda c: 0.0)
    return {"samples": total, "own": [(f, pct(c)) for f, c in own.most_common(n)],
            "inclusive": [(f, pct(c)) for f, c in inclusive.most_common(n) if "(" in f][:n]}


def idempotent(args: argparse.Namespace) -> bool:
    return args.acks == "all" if args.idempotence == "auto" else args.idempotence == "on"


def leaders(cluster: ZkCluster, topic: str, partitions: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {i: [] for i in cluster.brokers}
    for p in range(partitions):
        out.setdefault(cluster.leader(topic, p), []).append(p)
    return out


def one_rep(cluster: ZkCluster, rep: int, args: argparse.Namespace, probe_dir: Path, stacks_dir: Path) -> dict[str, Any]:
    topic = f"profile-{rep}"
    rf = min(cluster.size, 3)
    _common.create_topic(cluster.bootstrap, topic, args.partitions, replication_factor=rf)
    cluster.wait_in_sync(topic, args.partitions)
    led = leaders(cluster, topic, args.partitions)
    pids = {i: b.proc.pid for i, b in cluster.brokers.items() if b.proc is not None}
    time.sleep(0.6)    # a fresh probe snapshot
    probes_before = {i: probe_snapshot(probe_dir, pid) for i, pid in pids.items()}
    spies = {i: start_pyspy(pid, stacks_dir / f"rep{rep}-broker{i}.txt", args.pyspy_rate)
             for i, pid in pids.items()} if args.pyspy else {}
    if spies:
        time.sleep(1.0)    # py-spy attaches
    load = os.getloadavg()
    cpu_before = cluster_bench.broker_cpu(cluster)
    r = cluster_bench.call_worker({"bootstrap": cluster.bootstrap, "topic": topic, "count": args.records,
                                   "size": args.size, "acks": args.acks, "idempotent": idempotent(args)})
    cpu_after = cluster_bench.broker_cpu(cluster)
    for spy in spies.values():
        stop_pyspy(spy)
    time.sleep(0.6)
    probes_after = {i: probe_snapshot(probe_dir, pid) for i, pid in pids.items()}
    brokers = {}
    for i in pids:
        cpu = cpu_after.get(i, 0.0) - cpu_before.get(i, 0.0)
        brokers[i] = {"leads_partitions": led.get(i, []), "cpu_s": cpu, "cpu_us_per_record": cpu / args.records * 1e6,
                      "probe": probe_delta(probes_before[i], probes_after[i]) if args.probe else None,
                      "pyspy": top_functions(stacks_dir / f"rep{rep}-broker{i}.txt", args.top) if spies else None}
    _common.delete_topic(cluster.bootstrap, topic)
    return {"loadavg": load, "loadavg_after": os.getloadavg(), "produce": r, "brokers": brokers}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--system", choices=("pylog", "kafka"), default="pylog")
    ap.add_argument("--cluster-size", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--acks", default="all", choices=("1", "all"))
    ap.add_argument("--idempotence", choices=("auto", "on", "off"), default="auto",
                    help="the producer's enable.idempotence (auto: on with acks=all)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--probe", action="store_true", help="pylog: time the replication steps (bench/_replication_probe.py)")
    ap.add_argument("--recheck", action="store_true",
                    help="pylog: the probe's experimental long poll that reads again after registering its waiter")
    ap.add_argument("--pyspy", action="store_true", help="pylog: py-spy record every broker during the produce")
    ap.add_argument("--pyspy-rate", type=int, default=100)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--stacks-dir", type=Path, default=None, help="keep py-spy's collapsed stacks here")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--replica-lag-ms", type=int, default=10000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.system == "kafka" and (args.probe or args.pyspy or args.recheck):
        ap.error("--probe, --recheck and --pyspy apply to pylog only")
    args.probe = args.probe or args.recheck
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    workdir = Path(tempfile.mkdtemp(prefix="cluster-profile-"))
    stacks_dir = args.stacks_dir or workdir / "stacks"
    stacks_dir.mkdir(parents=True, exist_ok=True)
    probe_dir = workdir / "probe"
    runs = []
    try:
        with make_cluster(args, workdir / "cluster", probe_dir) as cluster:
            for rep in range(args.reps):
                runs.append(one_rep(cluster, rep, args, probe_dir, stacks_dir))
                r = runs[-1]
                print(f"rep {rep + 1}: {args.system} x{args.cluster_size} acks={args.acks} idempotent={idempotent(args)}"
                      f"{' recheck' if args.recheck else ''}: "
                      f"{r['produce'].get('records_per_s', 0):,.0f} rec/s in {r['produce'].get('seconds', 0):.2f} s, client "
                      f"{r['produce'].get('client_cpu_s', 0):.2f} s CPU, {r['produce'].get('queue_full_s', 0):.2f} s "
                      "waiting for queue room, "
                      f"load {r['loadavg'][0]:.1f}; "
                      + "; ".join(f"broker {i} leads {b['leads_partitions']}: {b['cpu_us_per_record']:.1f} us/rec"
                                  for i, b in r["brokers"].items()), file=sys.stderr, flush=True)
    finally:
        if args.stacks_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    doc = {"benchmark": "cluster_profile", "date": stamp, "argv": sys.argv, "settings": vars(args),
           "machine": cluster_bench.machine(), "runs": runs}
    out = args.out or _common.REPO / "bench" / "results" / f"cluster_profile-{args.system}-{stamp}.json"
    _common.write_json(out, json.loads(json.dumps(doc, default=str)))
    print(json.dumps(runs, indent=1, default=str))
    print(f"results written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
