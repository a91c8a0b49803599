"""`make demo` is the first thing a new user runs: it must end on its summary, with no error after it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.jobs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NOISE = re.compile(r"ERROR|Traceback|Exception|%\d\|\d|FAIL|Connection refused", re.IGNORECASE)


def test_the_demo_runs_exactly_once_and_ends_cleanly_on_its_summary(tmp_path):
    demo = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "pylog.demo"], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=500,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "PYLOG_DEMO_DIR": str(demo)})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "=== pylog demo summary ===" in ln)
    summary = "\n".join(lines[start:])
    assert "exactly once            : yes" in summary and "consumer group lag      : 0" in summary, summary
    after = [ln for ln in lines[start + 1:] if ln.strip() and " : " not in ln]
    assert after[0] == f"everything the demo made is in {demo}:", after
    assert all("stopped the broker" in ln for ln in after[1:]), f"unexpected lines after the summary: {after}"
    # what it made stays, and the summary's commands for looking at it work as printed
    assert (demo / "tables" / "events" / "_delta_log").is_dir() and (demo / "broker-data").is_dir()
    look = next(ln for ln in lines if "look at the table" in ln).split(" : ", 1)[1]
    shown = subprocess.run(look, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "event_id" in shown.stdout, shown.stderr[-2000:]
    offsets = next(ln for ln in lines if "its offsets" in ln).split(" : ", 1)[1]
    shown = subprocess.run(offsets, shell=True, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "('events', 0)" in shown.stdout, shown.stderr[-2000:]
    runs = next(ln for ln in lines if "its runs" in ln).split(" : ", 1)[1]
    shown = subprocess.run(runs, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert shown.returncode == 0 and " committed " in shown.stdout, shown.stdout + shown.stderr[-2000:]
    noisy = [ln for ln in lines if NOISE.search(ln)]
    assert noisy == [], f"error lines in the demo's output: {noisy[:10]}"
