"""Benchmark: what a short `pylog job` run costs in CPU and time, with Spark's Python processes importing the
installed pyspark (jobs/spark_home.py, the default) against importing the zip pyspark ships (SPARK_HOME set to
pyspark's own folder: Spark's behaviour before, and what a user who sets SPARK_HOME gets).

One pylog broker with --records 100-byte JSON records on 2 partitions; each run is, as a user runs it,

    python -m pylog job batch_load --set source.bootstrap.servers=... --set sink.table.path=NEW_TABLE ...

into a new Delta table (the whole topic, one Spark job). Both variants alternate (A B, B A, ...), each with its
own class archive of the driver's classes (`python -m jobs.class_archive` under that SPARK_HOME), so only the
Python processes' imports differ. Figures: wall time of the job process, and CPU of the whole machine over the
run (/proc/stat: the JVM, its Python daemons and workers, the job's own Python, the broker), which is why the
machine must be otherwise idle. Prints per-run rows and medians; --out writes them as JSON.

Usage: .venv/bin/python bench/job_start.py [--reps 5] [--records 20000] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import PYTHON, REPO, create_topic, start_pylog, write_json  # noqa: E402


def machine_cpu() -> float:
    """Seconds of CPU the whole machine spent (user, nice, system, irq, softirq), from /proc/stat."""
    fields = open("/proc/stat").readline().split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=json.dumps({"event_id": str(i), "user_id": "u", "type": "t",
                                                            "amount": 1.5, "ts": i}).encode())
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def run_job(env: dict[str, str], bootstrap: str, table: Path) -> tuple[float, float]:
    cmd = [PYTHON, "-m", "pylog", "job", "batch_load", "--set", f"source.bootstrap.servers={bootstrap}",
           "--set", "source.topics=events", "--set", f"sink.table.path={table}", "--set", "group.mirror="]
    c0, t0 = machine_cpu(), time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    wall, cpu = time.monotonic() - t0, machine_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"the job failed ({done.returncode}): {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import pyspark
    base = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "SPARK_CONF_DIR")}
    base.update(PYSPARK_PYTHON=PYTHON, SPARK_LOCAL_IP="127.0.0.1")
    variants = {"installed pyspark (default)": dict(base),
                "pyspark.zip (SPARK_HOME=pyspark's folder)": {**base, "SPARK_HOME": str(Path(pyspark.__file__).parent)}}
    for env in variants.values():      # each variant's own class archive, so only the Python side differs
        subprocess.run([PYTHON, "-m", "jobs.class_archive"], cwd=REPO, env=env, check=True, capture_output=True)

    work = Path(tempfile.mkdtemp(prefix="job-start-"))
    broker = start_pylog(work / "broker")
    try:
        create_topic(broker.bootstrap, "events", 2)
        produce(broker.bootstrap, "events", args.records)
        rows: list[dict[str, object]] = []
        names = list(variants)
        run_job(variants[names[0]], broker.bootstrap, work / "warmup")        # page cache, broker warm
        for rep in range(args.reps):
            for name in (names if rep % 2 == 0 else names[::-1]):
                wall, cpu = run_job(variants[name], broker.bootstrap, work / f"t-{rep}-{names.index(name)}")
                rows.append({"rep": rep, "variant": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
                print(f"rep {rep} {name:45s} wall {wall:6.2f} s  machine CPU {cpu:6.2f} s", flush=True)
    finally:
        broker.stop()
    summary = {}
    for name in names:
        mine = [r for r in rows if r["variant"] == name]
        summary[name] = {"wall_s": statistics.median(float(r["wall_s"]) for r in mine),
                         "cpu_s": statistics.median(float(r["cpu_s"]) for r in mine)}
        print(f"median {name:45s} wall {summary[name]['wall_s']:6.2f} s  CPU {summary[name]['cpu_s']:6.2f} s")
    ratios = [float(a["cpu_s"]) / float(b["cpu_s"]) for a, b in zip(
        [r for r in rows if r["variant"] == names[0]], [r for r in rows if r["variant"] == names[1]])]
    print(f"CPU ratio default/zip per rep: {', '.join(f'{x:.2f}' for x in ratios)}")
    write_json(args.out, {"records": args.records, "rows": rows, "summary": summary, "cpu_ratios": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main())
