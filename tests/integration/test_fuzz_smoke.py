"""A short run of every fuzzing harness in fuzz/ (issue 15): the long runs are by hand (fuzz/README.md).

Each atheris target runs as libFuzzer would run it for real (its seed corpus, then coverage-guided
mutations, a fixed seed), with a scratch directory first so the corpus kept in the repository is
never written to; any uncaught exception, timeout or memory blow-up makes it exit non-zero. The
live-broker mutator runs for 10 s against a real broker process beside a healthy client, with the
same assertions as its long runs: broker alive and answering, no traceback in its log, RSS bounded,
every healthy record intact and in order.
"""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from broker.apis.registry import API_TABLE
from kafka_protocol.codec import decode_request, request_schema
from fuzz import live_broker

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "fuzz" / "corpus"
RUNS = {"framing": 8_000, "requests": 3_000, "validator": 10_000}   # about 5 s each (make test budget)


@pytest.mark.parametrize("target", sorted(RUNS))
def test_atheris_target_runs_clean(target, tmp_path):
    before = sorted(p.name for p in (CORPUS / target).iterdir())
    scratch = tmp_path / "corpus"
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", f"fuzz.fuzz_{target}", str(scratch), str(CORPUS / target), f"-runs={RUNS[target]}",
         "-seed=1", "-max_total_time=40", "-timeout=10", "-rss_limit_mb=1024", f"-artifact_prefix={tmp_path}/"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Uncaught Python exception" not in out and "Finding" not in out, out[-4000:]
    assert f"Done {RUNS[target]} runs" in out, out[-2000:]
    assert sorted(p.name for p in (CORPUS / target).iterdir()) == before, "the kept corpus was written to"


def test_requests_corpus_holds_a_valid_request_of_every_advertised_api():
    keys = set()
    for f in (CORPUS / "requests").iterdir():
        payload = f.read_bytes()
        api_key, version = struct.unpack_from(">hh", payload)
        assert API_TABLE[api_key].min_version <= version <= API_TABLE[api_key].max_version, f.name
        decode_request(payload, request_schema(api_key, version))
        keys.add(api_key)
    assert keys == set(API_TABLE), "regenerate with `python -m fuzz.make_corpus`"


def test_live_broker_mutator_leaves_the_broker_and_a_healthy_client_intact(tmp_path):
    report = live_broker.run(10, seed=7, workdir=tmp_path / "live", log=lambda s: None)
    assert report.ok, "\n".join(report.problems)
    assert report.stats.connections > 100 and report.healthy_records > 500, report
    assert report.rss_max_mb < report.rss_bound_mb
