"""Tests start brokers with the product's own launcher (pylog.launch.process); `broker_metrics` reads one's
/metrics (a broker started with metrics.port, which logs the port it took)."""
from __future__ import annotations

import re
import urllib.request

from pylog.launch.process import BrokerProcess, free_port, wait_for_port

__all__ = ["BrokerProcess", "broker_metrics", "free_port", "wait_for_port"]


def broker_metrics(broker: BrokerProcess, **labels: str) -> dict[str, float]:
    """The series of the broker's /metrics with exactly `labels` (none: the unlabelled ones)."""
    from prometheus_client.parser import text_string_to_metric_families
    port = re.findall(r"metrics \(Prometheus\) on http://[^:]+:(\d+)/metrics", broker.log_text())[-1]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if s.labels == labels}
