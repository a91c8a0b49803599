"""`pylog console` page times on a topic with 1,000 partitions (target: each page under 500 ms).

One pylog broker and one `pylog console` process (both as users run them); a topic of `--partitions` partitions
with a few records on each, and a group with a committed offset on every one of them. Each round, in alternating
order, measures:
- server side: the wall time of an HTTP GET (connection, the console's broker calls, rendering, transfer) of the
  topic page, the groups page and the group's page;
- in the browser (Debian's chromium, headless, through /usr/bin/chromedriver): Navigation Timing's
  loadEventEnd - startTime of the topic page and of the group's page (parsing, layout, the chart's script);
- the peer: `pylog topics describe --topic T` as a whole command (a fresh process: imports, connection,
  metadata, configs, printing 1,000 lines), what an operator ran before the console.

Usage: .venv/bin/python bench/console_bench.py [--partitions 1000] [--rounds 9] [--no-browser]
Never imports broker code: the broker is a separate process. Raw figures go to bench/results/.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.launch.process import BrokerProcess, ConsoleProcess

REPO = Path(__file__).resolve().parent.parent
TOPIC, GROUP = "wide", "wide-readers"
TARGET_MS = 500.0


def prepare(bootstrap: str, partitions: int, per_partition: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(TOPIC, b"value-%d" % i, partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, per_partition // 2) for p in range(partitions)], asynchronous=False)
    finally:
        c.close()


def http_ms(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        assert r.status == 200 and body, url
    return (time.perf_counter() - start) * 1000


def command_ms(bootstrap: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pylog", "topics", "describe", "--topic", TOPIC,
                           "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=120)
    elapsed = (time.perf_counter() - start) * 1000
    assert done.returncode == 0 and done.stdout.count("Partition:") >= 1, done.stderr[-500:]
    return elapsed


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='pylog-bench-chromium-')}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def browser_ms(driver: Any, url: str) -> float:
    driver.get(url)                 # returns once the load event has fired
    timing = driver.execute_script("const n = performance.getEntriesByType('navigation')[0];"
                                   "return [n.startTime, n.loadEventEnd];")
    assert timing[1] > 0, url
    return float(timing[1] - timing[0])


def summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records-per-partition", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pylog-console-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start(timeout=60)
        console: ConsoleProcess | None = None
        driver = None
        try:
            prepare(broker.bootstrap, args.partitions, args.records_per_partition)
            console = ConsoleProcess(Path(tmp) / "console", broker.bootstrap).start(timeout=60)
            pages = {"topic page": console.url(f"/topics/{TOPIC}"), "groups page": console.url("/groups"),
                     "group page": console.url(f"/groups/{GROUP}")}
            if not args.no_browser:
                driver = browser()
            cases: dict[str, Callable[[], float]] = {
                **{f"GET {name}": (lambda url=url: http_ms(url)) for name, url in pages.items()},
                "pylog topics describe": lambda: command_ms(broker.bootstrap),
            }
            if driver is not None:
                cases["browser topic page"] = lambda: browser_ms(driver, pages["topic page"])
                cases["browser group page"] = lambda: browser_ms(driver, pages["group page"])
            for case in cases.values():          # warm-up: the console's first AdminClient calls, chromium's cache
                case()
            figures: dict[str, list[float]] = {name: [] for name in cases}
            for r in range(args.rounds):
                order = list(cases) if r % 2 == 0 else list(reversed(cases))
                for name in order:
                    figures[name].append(cases[name]())
        finally:
            if driver is not None:
                driver.quit()
            if console is not None:
                console.close()
            broker.close()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "partitions": args.partitions, "records_per_partition": args.records_per_partition, "rounds": args.rounds,
        "cores": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
        "ms": {name: summary(values) for name, values in figures.items()}, "raw_ms": figures,
    }
    out = args.out or REPO / "bench" / "results" / f"console_bench-{datetime.date.today()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"{args.partitions} partitions, {args.rounds} rounds, load {load_before[0]:.2f} -> "
          f"{result['load_after'][0]:.2f} (1 min)")           # type: ignore[index]
    print(f"{'case':<26} {'min':>8} {'median':>8} {'max':>8}   target {TARGET_MS:.0f} ms")
    for name, s in result["ms"].items():                      # type: ignore[union-attr]
        met = "" if name.startswith("pylog") else ("met" if s["max"] < TARGET_MS else "MISSED")
        print(f"{name:<26} {s['min']:8.1f} {s['median']:8.1f} {s['max']:8.1f}   {met}")
    print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
