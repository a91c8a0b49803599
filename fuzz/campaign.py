"""Run the fuzzing harnesses for a time budget and tabulate the results (what `make fuzz` runs).

Targets: the atheris ones (framing, requests, validator), the native cargo-fuzz one (native-validate:
needs `cargo +nightly` and cargo-fuzz) and the live-broker mutator (live). The budget (`--seconds`, the
total of every target's run time) is shared by weight; `--jobs` targets run at once (2 by default: the
live run uses a broker process beside its own). Each target gets a scratch corpus under the work
directory, so the corpora kept in the repository only seed the runs. A crash, timeout or OOM stops a
libFuzzer run: the input is in `<workdir>/<target>/artifacts/`, and the target starts again (from its
scratch corpus) for the rest of its time, so one finding does not end the campaign.

Usage: `python -m fuzz.campaign --seconds 1800 [--targets framing,requests] [--workdir /tmp/fuzzruns]`
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = {"framing": 8, "requests": 8, "validator": 6, "native-validate": 5, "live": 6}
LIBFUZZER_FLAGS = ["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"]


@dataclass
class Result:
    target: str
    seconds: float = 0.0
    executions: int = 0
    crashes: int = 0
    timeouts: int = 0
    ooms: int = 0
    restarts: int = 0
    corpus: int = 0
    peak_rss_mb: float = 0.0
    failed: bool = False          # a crash, timeout or OOM, or (live) any assertion of the run failed
    notes: list[str] = field(default_factory=list)


def _libfuzzer(target: str, budget: float, work: Path, seed: int) -> Result:
    r = Result(target)
    corpus, artifacts = work / "corpus", work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + budget
    started = time.monotonic()
    run = 0
    while (left := deadline - time.monotonic()) > 5:
        flags = [f"-max_total_time={int(left)}", f"-seed={seed + run}", f"-artifact_prefix={artifacts}/",
                 *LIBFUZZER_FLAGS]
        if target == "native-validate":
            cmd = ["cargo", "+nightly", "fuzz", "run", "validate", str(corpus), "fuzz/corpus/validate", "--", *flags]
            cwd = ROOT / "native"
        else:
            cmd = [sys.executable, "-m", f"fuzz.fuzz_{target}", str(corpus), str(ROOT / "fuzz/corpus" / target), *flags]
            cwd = ROOT
        with open(work / f"run{run}.log", "w") as log:
            proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        text = (work / f"run{run}.log").read_text(errors="replace")
        r.executions += sum(int(x) for x in re.findall(r"stat::number_of_executed_units:\s+(\d+)", text))
        rss = [int(x) for x in re.findall(r"stat::peak_rss_mb:\s+(\d+)", text)]
        r.peak_rss_mb = max([r.peak_rss_mb, *rss])
        corp = re.findall(r"corp: (\d+)/", text)
        if corp:
            r.corpus = int(corp[-1])
        if proc.returncode != 0:
            kind = "timeout" if "ALARM: working on the last Unit" in text else \
                "oom" if "out-of-memory" in text else "crash"
            setattr(r, {"crash": "crashes", "timeout": "timeouts", "oom": "ooms"}[kind],
                    getattr(r, {"crash": "crashes", "timeout": "timeouts", "oom": "ooms"}[kind]) + 1)
            m = re.search(r"(Finding: [^\n]*|panicked at [^\n]*|ERROR: [^\n]*)", text)
            r.notes.append(f"run {run}: {kind}: {m.group(1) if m else proc.returncode} (see {work}/run{run}.log)")
            r.restarts += 1
            r.failed = True
        run += 1
    r.seconds = time.monotonic() - started
    return r


def _live(budget: float, work: Path, seed: int) -> Result:
    r = Result("live")
    started = time.monotonic()
    cmd = [sys.executable, "-m", "fuzz.live_broker", "--seconds", str(int(budget)), "--seed", str(seed),
           "--workdir", str(work / "live")]
    with open(work / "live.log", "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    text = (work / "live.log").read_text(errors="replace")
    r.seconds = time.monotonic() - started
    try:
        report = json.loads(text[text.index("\n{") + 1:])
    except ValueError:
        r.failed = True
        r.notes.append(f"no report (exit {proc.returncode}); see {work}/live.log")
        return r
    r.failed = not report["ok"]
    r.executions = report["stats"]["frames"]
    r.peak_rss_mb = report["rss_max_mb"]
    r.crashes = report["tracebacks"]
    r.notes += report["problems"]
    r.notes.append(f"{report['stats']['connections']} connections, healthy client: {report['healthy_records']} records "
                   f"{'intact' if not any('record' in p for p in report['problems']) else 'NOT intact'}; "
                   f"RSS {report['rss_start_mb']:.0f} -> max {report['rss_max_mb']:.0f} MiB "
                   f"(bound {report['rss_bound_mb']:.0f})")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600, help="total run time of all targets")
    ap.add_argument("--targets", default=",".join(WEIGHTS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/fuzzruns"))
    args = ap.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(WEIGHTS)
    if unknown:
        raise SystemExit(f"unknown targets: {', '.join(sorted(unknown))}")
    if "native-validate" in targets and shutil.which("cargo") is None:
        raise SystemExit("native-validate needs cargo (+nightly, cargo-fuzz): see native/fuzz/README.md")
    total = sum(WEIGHTS[t] for t in targets)
    results: dict[str, Result] = {}
    pending = list(targets)
    running: list[threading.Thread] = []

    def work(t: str) -> None:
        budget = args.seconds * WEIGHTS[t] / total
        d = args.workdir / t
        d.mkdir(parents=True, exist_ok=True)
        results[t] = _live(budget, d, args.seed) if t == "live" else _libfuzzer(t, budget, d, args.seed)
        print(f"{t}: done {json.dumps(asdict(results[t]))}", flush=True)

    while pending or running:
        running = [th for th in running if th.is_alive()]
        while pending and len(running) < args.jobs:
            th = threading.Thread(target=work, args=(pending.pop(0),))
            th.start()
            running.append(th)
        time.sleep(1)
    (args.workdir / "summary.json").write_text(json.dumps([asdict(results[t]) for t in targets], indent=2))
    print("\n| target | minutes | executions | crashes | timeouts | OOMs | corpus | peak RSS MiB | ok |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in targets:
        r = results[t]
        print(f"| {t} | {r.seconds / 60:.1f} | {r.executions} | {r.crashes} | {r.timeouts} | {r.ooms} | {r.corpus} | "
              f"{r.peak_rss_mb:.0f} | {'no' if r.failed else 'yes'} |")
    for t in targets:
        for note in results[t].notes:
            print(f"- {t}: {note}")
    raise SystemExit(1 if any(r.failed for r in results.values()) else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
