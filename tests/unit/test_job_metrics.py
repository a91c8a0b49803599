"""A job run's metrics (jobs.job_metrics): served over HTTP while it runs and written as a textfile, with the
figures the run reports; refused settings in one line."""
from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs.config import JobConfig, JobConfigError
from jobs.job_metrics import JobMetrics


def _samples(text: str) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("pylog_job_run_outcome", "")): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.labels.get("job") == "stream_to_delta" and s.labels.get("app") == "orders"}


def test_a_streams_batches_are_scraped_while_it_runs_and_its_end_is_in_the_textfile(tmp_path):
    textfile = tmp_path / "job.prom"
    m = JobMetrics.from_config(JobConfig("stream_to_delta", {"metrics.port": "0",
                                                             "metrics.textfile": str(textfile)}), "orders")
    assert m is not None
    m.batch(100, lag=50, version=3)
    m.batch(50, lag=0, version=4)
    port = m._server[0].server_port
    scraped = _samples(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())
    assert scraped[("pylog_job_records_total", "")] == 150 and scraped[("pylog_job_batches_total", "")] == 2
    assert scraped[("pylog_job_lag_records", "")] == 0 and scraped[("pylog_job_delta_version", "")] == 4
    assert scraped[("pylog_job_run_outcome", "running")] == 1
    m.end("committed")
    written = _samples(textfile.read_text())
    assert written[("pylog_job_run_outcome", "committed")] == 1 and written[("pylog_job_run_outcome", "running")] == 0
    assert written[("pylog_job_run_end_timestamp_seconds", "")] >= written[("pylog_job_run_start_timestamp_seconds", "")]
    with pytest.raises(OSError):   # the server is gone with the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_metrics_are_off_unless_asked_for_and_a_bad_port_is_one_line():
    assert JobMetrics.from_config(JobConfig("batch_load", {}), "a") is None
    with pytest.raises(JobConfigError, match="metrics.port must be a port number"):
        JobMetrics.from_config(JobConfig("batch_load", {"metrics.port": "70000"}), "a")


def test_docs_metrics_lists_exactly_the_job_metrics():
    page = (Path(__file__).resolve().parents[2] / "docs" / "METRICS.md").read_text()
    documented = set(re.findall(r"^\| `(pylog_job_\w+)`", page, re.MULTILINE))
    m = JobMetrics("batch_load", "a", None, "127.0.0.1", None)
    exposed = {s.name for f in m.registry.collect() for s in f.samples}
    assert documented == exposed
