"""The broker's Prometheus metrics (`metrics.port`): what Kafka's JMX beans tell an operator, by Prometheus' names.

Two kinds, both in one `CollectorRegistry` served by prometheus_client's own HTTP server on its own thread
(a scrape never waits for the event loop, and the loop never waits for a scrape):

- **Events**, counted where they happen (on the event loop; a prometheus_client counter is a lock and an
  add): records and bytes produced per topic, bytes fetched per topic (consumers; followers apart), requests,
  errors and latency per API, connections opened and closed per listener.
- **State**, read at scrape time by `_StateCollector` from the broker's own structures, copied first (a
  `list(dict.items())` holds the GIL throughout, so the loop cannot change a dict half-way through a copy):
  per partition the log's size, segments, start and end offset and high watermark; groups, their members
  and rebalances; each group's committed offset and lag (high watermark minus committed, for every group
  this broker coordinates, the groups the Spark jobs mirror included); ISR shrinks and expands, under-
  replicated partitions and whether this broker is the controller (cluster mode); the last recovery's time.

Names follow Prometheus' conventions (`pylog_` prefix, `_total` counters, `_bytes`, `_seconds`).
`docs/METRICS.md` lists them; conf/grafana/pylog-broker.json is a dashboard built on them.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Iterable, Iterator

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics,
                               start_http_server)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class BrokerMetrics:
    """The broker's registry and event metrics; `serve` starts the HTTP endpoint, `watch` adds the state."""

    def __init__(self) -> None:
        disable_created_metrics()        # no `_created` series beside each counter: nothing here reads them
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_in = Counter("pylog_messages_in", "Records appended by Produce requests, per topic.",
                                   ["topic"], registry=r)
        self.bytes_in = Counter("pylog_bytes_in", "Record-batch bytes appended by Produce requests, per topic.",
                                ["topic"], registry=r)
        self.bytes_out = Counter("pylog_bytes_out", "Record bytes sent to consumers in Fetch responses, per topic.",
                                 ["topic"], registry=r)
        self.replication_bytes_out = Counter("pylog_replication_bytes_out",
                                             "Record bytes sent to follower brokers, per topic.", ["topic"],
                                             registry=r)
        self.requests = Counter("pylog_requests", "Requests answered, per API.", ["api"], registry=r)
        self.errors = Counter("pylog_request_errors", "Error codes in responses (top-level and per partition), "
                              "per API and error.", ["api", "error"], registry=r)
        self.latency = Histogram("pylog_request_duration_seconds", "Time from a request's arrival to its "
                                 "response, per API.", ["api"], buckets=LATENCY_BUCKETS, registry=r)
        self.connections = Gauge("pylog_connections", "Open client connections, per listener.", ["listener"],
                                 registry=r)
        self.connections_opened = Counter("pylog_connections_opened", "Client connections accepted, per listener.",
                                          ["listener"], registry=r)
        self.flush_seconds = Histogram("pylog_log_flush_duration_seconds", "Time of one partition log's fsync.",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.recovery_seconds = Gauge("pylog_log_recovery_seconds", "How long the last start took to load (and "
                                      "recover) the partition logs.", registry=r)
        self._by_topic: dict[str, tuple[Any, Any]] = {}
        self._out: dict[tuple[str, bool], Any] = {}
        self._server: Any = None

    # --- events, on the event loop -------------------------------------------------------------

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        children = self._by_topic.get(topic)
        if children is None:
            children = self._by_topic[topic] = (self.messages_in.labels(topic), self.bytes_in.labels(topic))
        children[0].inc(records)
        children[1].inc(nbytes)

    def fetched(self, topic: str, nbytes: int, follower: bool) -> None:
        child = self._out.get((topic, follower))
        if child is None:
            child = self._out[(topic, follower)] = (self.replication_bytes_out if follower
                                                    else self.bytes_out).labels(topic)
        child.inc(nbytes)

    def answered(self, api: str, seconds: float, error_codes: Iterable[Any] = ()) -> None:
        self.requests.labels(api).inc()
        self.latency.labels(api).observe(seconds)
        for code in error_codes:
            self.errors.labels(api, _error_name(code)).inc()

    def partition_errors(self, api: str, codes: Iterable[Any]) -> None:
        """Errors of a response encoded by its handler (Produce, Fetch): the partitions' codes."""
        for code in codes:
            if int(code) != 0:
                self.errors.labels(api, _error_name(code)).inc()

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series go with it (a scrape would otherwise keep reporting them)."""
        self._by_topic.pop(topic, None)
        for follower in (False, True):
            self._out.pop((topic, follower), None)
        for metric in (self.messages_in, self.bytes_in, self.bytes_out, self.replication_bytes_out):
            try:
                metric.remove(topic)
            except KeyError:
                pass

    # --- serving -------------------------------------------------------------------------------

    def watch(self, ctx: Any) -> None:          # a broker.context.BrokerContext (which holds this object)
        """Report the broker's state (logs, groups, lag, cluster) at each scrape."""
        self.registry.register(_StateCollector(ctx))

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics on host:port (port 0: any); the port bound."""
        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        bound = int(self._server.server_address[1])
        log.info("metrics (Prometheus) on http://%s:%d/metrics", host, bound)
        return bound

    def close(self) -> None:
        if self._server is not None:
            threading.Thread(target=self._server.shutdown, daemon=True).start()
            self._server.server_close()
            self._server = None


def _error_name(code: Any) -> str:
    name = getattr(code, "name", None)
    return str(name).upper() if name is not None else str(code)


def response_errors(entity: Any, depth: int = 3) -> Iterator[Any]:
    """The non-zero `error_code`s of a response entity (top level and nested, as Kafka's errorCounts)."""
    code = getattr(entity, "error_code", None)
    if code is not None and int(code) != 0:
        yield code
    if depth == 0:
        return
    for name in getattr(entity, "__dataclass_fields__", ()):
        value = getattr(entity, name, None)
        if isinstance(value, tuple):
            for item in value:
                if hasattr(item, "__dataclass_fields__"):
                    yield from response_errors(item, depth - 1)


class _StateCollector(Collector):
    """The broker's state, read at scrape time on the HTTP server's thread."""

    def __init__(self, ctx: Any) -> None:       # a BrokerContext: its replicas, groups and node id
        self.ctx = ctx

    def collect(self) -> Iterator[Metric]:
        ctx = self.ctx
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("pylog_log_size_bytes", "Bytes of a partition's log on disk.", labels=labels)
        segments = GaugeMetricFamily("pylog_log_segments", "Segments of a partition's log.", labels=labels)
        start = GaugeMetricFamily("pylog_log_start_offset", "First offset of a partition's log.", labels=labels)
        end = GaugeMetricFamily("pylog_log_end_offset", "Next offset a partition's log assigns.", labels=labels)
        hw = GaugeMetricFamily("pylog_high_watermark", "A partition's high watermark (what consumers may read).",
                               labels=labels)
        watermarks: dict[tuple[str, int], int] = {}
        for plog in list(ctx.replicas.logs.all_logs()):
            key = [plog.topic, str(plog.partition)]
            try:
                nbytes, nsegments = plog.size_in_bytes(), len(plog.segments)
            except (RuntimeError, ValueError, OSError):     # deleted or truncated meanwhile: next scrape
                continue
            watermarks[(plog.topic, plog.partition)] = plog.high_watermark
            size.add_metric(key, nbytes)
            segments.add_metric(key, nsegments)
            start.add_metric(key, plog.log_start_offset)
            end.add_metric(key, plog.log_end_offset)
            hw.add_metric(key, plog.high_watermark)
        yield from (size, segments, start, end, hw)
        yield from self._groups(watermarks)
        yield from self._cluster()
        yield from self._tiered()

    def _groups(self, watermarks: dict[tuple[str, int], int]) -> Iterator[Metric]:
        groups = self.ctx.groups
        if groups is None:
            return
        live = list(groups.groups.items())
        count = GaugeMetricFamily("pylog_groups", "Consumer groups this broker coordinates, per state.",
                                  labels=["state"])
        states: dict[str, int] = {}
        for _, group in live:
            states[group.state.value] = states.get(group.state.value, 0) + 1
        for state, n in sorted(states.items()):
            count.add_metric([state], n)
        members = GaugeMetricFamily("pylog_group_members", "Members of a consumer group.", labels=["group"])
        for group_id, group in live:
            members.add_metric([group_id], len(group.members))
        rebalances = CounterMetricFamily("pylog_group_rebalances", "Completed rebalances (join phases) of the "
                                         "groups coordinated here since the broker started.",
                                         value=groups.rebalances)
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily("pylog_consumer_group_committed_offset", "A group's committed offset.",
                                      labels=labels)
        lag = GaugeMetricFamily("pylog_consumer_group_lag", "High watermark minus a group's committed offset "
                                "(partitions whose log is on this broker).", labels=labels)
        for group_id in list(groups.store.groups()):
            for (topic, partition), value in groups.store.offsets_of(group_id).items():
                key = [group_id, topic, str(partition)]
                committed.add_metric(key, value.offset)
                high = watermarks.get((topic, partition))
                if high is not None:
                    lag.add_metric(key, max(high - value.offset, 0))
        yield from (count, members, rebalances, committed, lag)

    def _tiered(self) -> Iterator[Metric]:
        remote = self.ctx.remote
        if remote is None:
            return
        yield CounterMetricFamily("pylog_remote_copy_segments", "Segments uploaded to remote storage "
                                  "(Kafka's RemoteCopyRequestsPerSec).", value=remote.uploads)
        yield CounterMetricFamily("pylog_remote_copy_failures", "Remote storage passes that failed.",
                                  value=remote.upload_failures)
        yield CounterMetricFamily("pylog_remote_fetch_bytes", "Record bytes served from remote storage in Fetch "
                                  "responses (Kafka's RemoteFetchBytesPerSec).", value=remote.fetch_bytes)

    def _cluster(self) -> Iterator[Metric]:
        replication = self.ctx.replicas.replication
        cluster = self.ctx.replicas.cluster
        if replication is None or cluster is None:
            return
        yield GaugeMetricFamily("pylog_controller", "1 on the broker that is the active controller.",
                                value=1 if cluster.controller.active else 0)
        under = sum(1 for role in list(replication.roles.values())
                    if role.leader_state is not None and len(role.isr) < len(role.replicas))
        yield GaugeMetricFamily("pylog_under_replicated_partitions", "Partitions led here whose ISR is smaller "
                                "than their replica set.", value=under)
        yield CounterMetricFamily("pylog_isr_shrinks", "ISR shrinks written by this broker as leader.",
                                  value=replication.isr_shrinks)
        yield CounterMetricFamily("pylog_isr_expands", "ISR expansions written by this broker as leader.",
                                  value=replication.isr_expands)
        yield CounterMetricFamily("pylog_unclean_leader_elections", "Leaders this broker, as controller, elected "
                                  "from outside the ISR (unclean.leader.election.enable).",
                                  value=cluster.controller.unclean_elections)
