"""A job run's figures as Prometheus metrics: the records, batches, Delta version and lag its lines report.

Served while the job runs when `metrics.port` is set (prometheus_client's own HTTP server, on `metrics.host`,
127.0.0.1 unless set), which suits a stream; written to `metrics.textfile` after each batch and when the run
ends, for node_exporter's textfile collector, which suits a cron job that ends before any scrape. Every series
carries the labels job and app. Off when neither is set. Never fails the job: an unwritable file is a warning.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, disable_created_metrics, start_http_server
from prometheus_client import write_to_textfile

from jobs.config import JobConfig, JobConfigError

log = logging.getLogger("pylog.job.metrics")

OUTCOMES = ["running", "committed", "nothing new", "done", "failed", "stopped"]


class JobMetrics:
    def __init__(self, job: str, app_id: str, port: int | None, host: str, textfile: str | None) -> None:
        disable_created_metrics()   # type: ignore[no-untyped-call]
        self.textfile = textfile
        self.registry = r = CollectorRegistry(auto_describe=True)
        labels = {"job": job, "app": app_id}
        names = list(labels)
        self.records = Counter("pylog_job_records", "Rows this run committed.", names, registry=r).labels(**labels)
        self.batches = Counter("pylog_job_batches", "Batches (Delta commits, or micro-batches of stream_to_topic) "
                               "this run committed.", names, registry=r).labels(**labels)
        self.version = Gauge("pylog_job_delta_version", "The table's version after this run's last commit.", names,
                             registry=r).labels(**labels)
        self.lag = Gauge("pylog_job_lag_records", "Records in the source topics after the last batch's end offsets "
                         "(streams).", names, registry=r).labels(**labels)
        self.last_batch = Gauge("pylog_job_last_batch_timestamp_seconds", "When the last batch was committed.",
                                names, registry=r).labels(**labels)
        self.started = Gauge("pylog_job_run_start_timestamp_seconds", "When this run started.", names,
                             registry=r).labels(**labels)
        self.ended = Gauge("pylog_job_run_end_timestamp_seconds", "When this run ended (0 while it runs).", names,
                           registry=r).labels(**labels)
        self.outcome = Enum("pylog_job_run_outcome", "How this run ended (running while it runs).", names,
                            states=OUTCOMES, registry=r).labels(**labels)
        self.started.set(time.time())
        self.outcome.state("running")
        self._server: Any = None
        if port is not None:
            self._server = start_http_server(port, addr=host, registry=r)
            log.info("job metrics on http://%s:%d/metrics", host, self._server[0].server_port)
        self._write()

    @classmethod
    def from_config(cls, cfg: JobConfig, app_id: str) -> "JobMetrics | None":
        port = cfg.int("metrics.port")
        textfile = cfg.get("metrics.textfile")
        if port is not None and not 0 <= port <= 65535:
            raise JobConfigError(f"job {cfg.name}: metrics.port must be a port number (0 picks a free one), got {port}")
        if port is None and not textfile:
            return None
        host = cfg.get("metrics.host", "127.0.0.1")
        try:
            return cls(cfg.name, app_id, port, host, textfile)
        except OSError as e:
            raise JobConfigError(f"job {cfg.name}: cannot serve metrics on {host}:{port}: {e.strerror}") from None

    def batch(self, rows: int, lag: int | None, version: int | None) -> None:
        self.records.inc(rows)
        self.batches.inc()
        self.last_batch.set(time.time())
        if lag is not None:
            self.lag.set(lag)
        if version is not None:
            self.version.set(version)
        self._write()

    def end(self, outcome: str) -> None:
        self.ended.set(time.time())
        self.outcome.state(outcome if outcome in OUTCOMES else "failed")
        self._write()
        if self._server is not None:
            self._server[0].shutdown()
            self._server[0].server_close()

    def _write(self) -> None:
        if not self.textfile:
            return
        try:
            write_to_textfile(self.textfile, self.registry)
        except OSError as e:
            log.warning("could not write job metrics to %s: %s", self.textfile, e)
