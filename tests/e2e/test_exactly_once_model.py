"""The model-based walk of exactly-once into Delta (tests/support/eo_model.py), short: a few random user actions
with what the table must hold checked after each.

The long run, recorded in bench/RESULTS.md (PYLOG_MODEL_IN_PROCESS=1 runs the jobs that are not killed or
signalled in this process's Spark session instead of a `pylog job` process each: the same job code, no JVM start):
    PYLOG_MODEL_ACTIONS=1000 PYLOG_MODEL_SEED=1 PYLOG_MODEL_IN_PROCESS=1 \
        .venv/bin/python -m pytest tests/e2e/test_exactly_once_model.py -s
"""
from __future__ import annotations

import os

import pytest

from tests.support.eo_model import ExactlyOnceModel, in_process_runner

ACTIONS = int(os.environ.get("PYLOG_MODEL_ACTIONS", "2"))     # make test's walk; long walks: see the top
pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(os.environ.get("PYLOG_MODEL_TIMEOUT", str(120 + 60 * ACTIONS))))]


def test_random_user_actions_never_lose_or_duplicate_a_record(broker_factory, tmp_path, request):
    seed = int(os.environ.get("PYLOG_MODEL_SEED", str(int.from_bytes(os.urandom(2), "big"))))
    print(f"model walk: seed {seed}, {ACTIONS} actions", flush=True)
    in_process = in_process_runner(request.getfixturevalue("spark")) if os.environ.get("PYLOG_MODEL_IN_PROCESS") \
        else None
    model = ExactlyOnceModel(broker_factory(), tmp_path, seed, in_process)
    report = model.run_walk(ACTIONS, lambda i, a: print(f"model action {i + 1}/{ACTIONS}: {a}", flush=True))
    print(f"model walk: seed {seed}: {len(report.actions)} actions {report.counts()}; "
          f"{len(report.violations)} violations", flush=True)
    assert report.violations == [], f"seed {seed}:\n" + "\n".join(report.violations)
    assert len(report.actions) == ACTIONS + 1
