"""The failover timelines of a kept cluster_bench run (pylog only): what each broker logged, and when.

cluster_bench.py --keep leaves every cluster's directory and broker logs; its JSON has the wall-clock
time of each failover's signal (`signal_at`). For every pylog repetition this prints, in seconds after
the signal, the log lines that make up the failover of its topic: the controller seeing the broker go
(`live brokers: ...`) or the controlled-shutdown request, its election (`<topic>-0: leader N, epoch E`),
the new leader taking over (`<topic>-0: broker N leads`), followers switching (`follows`) and the
controlled shutdown's end, beside the benchmark's own figures (new leader in Metadata, first ack).

Usage: .venv/bin/python bench/cluster_timeline.py RESULTS.json KEPT_DIR
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Any

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) ([\w.]+): (.*)$")
FORMAT = "%Y-%m-%d %H:%M:%S,%f"
LISTENING = re.compile(r"pylog broker (\d+) listening on")


def events(logs: list[Path], topic: str, start: dt.datetime, window_s: float) -> list[tuple[float, str, str]]:
    """(seconds after `start`, broker log name, message) of the lines about `topic`'s failover."""
    keys = (f"{topic}-0:", "live brokers", "controlled shutdown", "is the controller", "no longer the controller",
            "did not answer", "cannot connect")
    out = []
    for path in logs:
        text = path.read_text(errors="replace")
        named = LISTENING.search(text)
        who = f"broker {named.group(1)}" if named else path.stem
        for line in text.splitlines():
            m = STAMP.match(line)
            if m is None or not any(k in m.group(4) for k in keys):
                continue
            at = (dt.datetime.strptime(m.group(1), FORMAT) - start).total_seconds()
            if -0.5 <= at <= window_s:
                out.append((at, who, m.group(4)[:160]))
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("kept", type=Path, help="the directory cluster_bench --keep printed")
    ap.add_argument("--window", type=float, default=15.0, help="seconds after the signal to show")
    args = ap.parse_args()
    doc: dict[str, Any] = json.loads(args.results.read_text())
    for rep, run in enumerate(doc["runs"].get("pylog", [])):
        if "failed" in run:
            continue
        logs = sorted((args.kept / f"pylog-{rep}-trio").glob("*.log"))
        for phase, topic in (("failover_kill", f"failover-{rep}"), ("controlled_shutdown", f"controlled-{rep}")):
            r = run[phase]
            if "signal_at" not in r:
                continue
            start = dt.datetime.strptime(r["signal_at"], FORMAT)
            print(f"\nrep {rep} {phase}: SIG{r['signal']} broker {r['killed']} (controller {r['controller']}); "
                  f"Metadata names a new leader at {r['new_leader_s']}, first ack at {r['first_ack_s']}")
            for at, who, msg in events(logs, topic, start, args.window):
                print(f"  {at:7.3f}  {who}  {msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
