"""The user-action soak (tests/support/soak.py), short: a few random actions with the checker after each.

For the long run: PYLOG_SOAK_ACTIONS=200 PYLOG_SOAK_SEED=1 .venv/bin/python -m pytest tests/e2e/test_soak.py -s
"""
from __future__ import annotations

import os

import pytest

from tests.support.soak import Soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(os.environ.get("PYLOG_SOAK_TIMEOUT", "900")))]


def test_random_user_actions_never_lose_or_duplicate_a_record(pylog_broker, tmp_path):
    actions = int(os.environ.get("PYLOG_SOAK_ACTIONS", "8"))   # 8: each kind of action once
    seed = int(os.environ.get("PYLOG_SOAK_SEED", "20261123"))
    report = Soak(pylog_broker, tmp_path, seed).run(actions, lambda i, a: print(f"soak action {i + 1}/{actions}: {a}",
                                                                                 flush=True))
    print(f"soak: {len(report.actions)} actions survived ({', '.join(report.actions)}); "
          f"{len(report.violations)} violations")
    assert report.violations == [], "\n".join(report.violations)
    assert len(report.actions) == actions
