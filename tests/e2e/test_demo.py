"""`make demo` is the first thing a new user runs: it must end on its summary, with no error after it."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.jobs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NOISE = re.compile(r"ERROR|Traceback|Exception|%\d\|\d|FAIL|Connection refused", re.IGNORECASE)


def test_the_demo_runs_exactly_once_and_ends_cleanly_on_its_summary():
    proc = subprocess.run([sys.executable, "-m", "jobs.demo"], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=500, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "=== pylog demo summary ===" in ln)
    summary = "\n".join(lines[start:])
    assert "exactly once            : yes" in summary and "consumer group lag      : 0" in summary, summary
    after = [ln for ln in lines[start + 1:] if ln.strip() and " : " not in ln]
    assert all("stopped the broker" in ln for ln in after), f"unexpected lines after the summary: {after}"
    noisy = [ln for ln in lines if NOISE.search(ln)]
    assert noisy == [], f"error lines in the demo's output: {noisy[:10]}"
