"""Rolling restart of a three-broker cluster under acks=all load (issue 31): pylog against Apache Kafka 3.9
(ZooKeeper mode), alternating system by system within each repetition, on fresh clusters.

Each repetition: three brokers (cluster_bench.make_cluster, the same settings for both systems:
controlled.shutdown.enable, min.insync.replicas 2, rf 3), a one-partition topic, and cluster_bench's acks=all
idempotent producer at --rate records/s. Once steady, each broker in turn gets SIGTERM (its controlled shutdown
moves its leadership away), is waited for, started again on its data, and the next one follows once the partition
is fully in sync again, as an operator's rolling restart does. Figures: the longest time the producer saw no
acknowledgement over the whole restart (the issue's stall; target <= 2 s and <= Kafka's), how long the restart
took, the brokers' exit codes, delivery errors, and the read-back check (every acknowledged record exactly once).

Usage:
  .venv/bin/python bench/rolling_restart_bench.py --brokers kafka,pylog --reps 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from cluster_bench import SYSTEMS, ProducerLoop, check, machine, make_cluster, read_back, spread  # noqa: E402


def rolling_restart(system: str, rep: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    settings = {"zookeeper.session.timeout.ms": args.session_timeout_ms, "controlled.shutdown.enable": "true",
                "default.replication.factor": 3, "min.insync.replicas": 2, "offsets.topic.replication.factor": 3,
                "offsets.topic.num.partitions": args.offsets_partitions, "auto.leader.rebalance.enable": "false"}
    out: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    cluster = make_cluster(system, workdir / f"{system}-{rep}", 3, settings, args.session_timeout_ms)
    with cluster:
        topic = f"rolling-{rep}"
        _common.create_topic(cluster.bootstrap, topic, 1, replication_factor=3)
        cluster.wait_in_sync(topic, 1)
        loop = ProducerLoop(cluster.bootstrap, topic, args.rate, args.size, args.message_timeout_ms,
                            args.request_timeout_ms).start()
        exit_codes: dict[int, int] = {}
        try:
            loop.wait_steady(args.rate)
            t0 = time.monotonic()
            for b in sorted(cluster.brokers):
                cluster.terminate(b)
                exit_codes[b] = cluster.wait_exit(b)
                cluster.restart(b)
                cluster.wait_in_sync(topic, 1)
            out["restart_s"] = time.monotonic() - t0
            time.sleep(1.0)                   # keep producing after the last broker is back
            out["longest_ack_gap_s"] = loop.longest_ack_gap(t0, time.monotonic())
        finally:
            unreported = loop.stop(args.message_timeout_ms / 1000 + 5)
        out["exit_codes"] = exit_codes
        out.update(check(loop, read_back(cluster, topic), unreported))
    out["loadavg_after"] = os.getloadavg()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--brokers", default="kafka,pylog", help="comma list out of kafka,pylog (alternated per rep)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=1000, help="records/s of the producer")
    ap.add_argument("--size", type=int, default=100, help="record value bytes")
    ap.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--offsets-partitions", type=int, default=50, help="offsets.topic.num.partitions of both")
    ap.add_argument("--message-timeout-ms", type=int, default=30000, help="the producer's message.timeout.ms")
    ap.add_argument("--request-timeout-ms", type=int, default=3000, help="the producer's request.timeout.ms")
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default bench/results/rolling_restart-<date>.json)")
    args = ap.parse_args()
    systems = [s.strip() for s in args.brokers.split(",") if s.strip()]
    if set(systems) - set(SYSTEMS):
        ap.error(f"choose systems from {', '.join(SYSTEMS)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    workdir = Path(tempfile.mkdtemp(prefix="rolling-bench-"))
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    try:
        for rep in range(args.reps):
            for system in systems:
                print(f"rep {rep + 1}/{args.reps}: {system} ...", file=sys.stderr, flush=True)
                try:
                    runs[system].append(rolling_restart(system, rep, args, workdir))
                except Exception as e:  # noqa: BLE001 - a failed repetition is reported, the others still run
                    runs[system].append({"error": f"{type(e).__name__}: {e}"[:2000]})
                    print(f"  {system} failed: {runs[system][-1]['error'][:300]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("| figure (median (min-max)) | " + " | ".join(systems) + " |")
    print("|---|" + "---:|" * len(systems))
    rows = [("longest time without an ack, s", "longest_ack_gap_s"), ("rolling restart took, s", "restart_s")]
    for label, key in rows:
        cells = []
        for s in systems:
            sp = spread([r.get(key) for r in runs[s] if "error" not in r])
            cells.append(f"{sp['median']:.2f} ({sp['min']:.2f}-{sp['max']:.2f})" if sp else "failed")
        print(f"| {label} | " + " | ".join(cells) + " |")
    for label, keys in [("delivery errors / lost / duplicated / unreported", ("failed", "lost", "duplicated", "unreported"))]:
        cells = [" / ".join(str(sum(int(r.get(k, 0)) for r in runs[s] if "error" not in r)) for k in keys)
                 for s in systems]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| brokers' exit codes | " + " | ".join(
        str(sorted({c for r in runs[s] if "error" not in r for c in r["exit_codes"].values()})) for s in systems) + " |")
    out_path = args.out or _common.REPO / "bench" / "results" / f"rolling_restart-{stamp}.json"
    _common.write_json(out_path, {"benchmark": "rolling_restart", "date": stamp, "argv": sys.argv,
                                  "machine": machine(), "settings": vars(args) | {"out": str(args.out)},
                                  "runs": json.loads(json.dumps(runs, default=str))})
    print(f"results written to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
