"""This broker as a member of a ZooKeeper cluster: session, registration, controller, view, admin writes.

Owns the cluster-mode lifecycle of one broker and every ZooKeeper write a broker (not the
controller) makes, in Kafka's layout:

- start: a ZooKeeper session (`zookeeper.connect`, chroot allowed), the ephemeral registration under
  `/brokers/ids` (a duplicate broker.id is refused), the cluster view's watches, then contending for
  controller (the controller's work runs on its own thread while this broker holds the epoch);
- admin requests from any broker: topic creation (Kafka's replica assignment over the live brokers;
  a replication factor above them is INVALID_REPLICATION_FACTOR), deletion requests, partition
  increases; the controller acts on them;
- a leader's ISR change: the partition state written only if its znode still has the version the
  leader saw, plus an `/isr_change_notification` entry, as Kafka's ZooKeeper-mode leaders did;
- producer id blocks from `/latest_producer_id_block` (Kafka's JSON, a conditional write per block),
  so no two brokers hand out the same producer id;
- the controller's requests to this broker (LeaderAndIsr, UpdateMetadata, StopReplica) are applied
  to its view here, fenced by controller epoch and by this broker's registration epoch
  (`role_requests`); `ready` is set once the first UpdateMetadata arrived: until then the broker
  knows neither the live brokers nor its roles;
- controlled shutdown: asks the controller (ControlledShutdown, API 7, over the inter-broker listener, again
  until it names no partition left or the controller changes) to move this broker's leaderships away, and waits
  until the view shows it leads nothing that could move.

Calls here block (kazoo); the broker runs them on worker threads, never on its event loop.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster import zk_layout
from broker.cluster.assignment import assign_replicas, check_new_partitions, check_new_topic
from broker.cluster import role_requests
from broker.cluster.cluster_view import ClusterView, ClusterWatcher, TopicPartition
from broker.cluster.controller import ClusterController, create_topic, request_topic_deletion
from broker.cluster.controller_channel import PeerConnection
from broker.cluster.controller_election import ControllerElection
from broker.cluster.membership import BrokerMembership
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_security import ZkSecurity, zk_security
from broker.cluster.topic_registry import TopicInfo
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment
from broker.security.inter_broker import PeerSecurity, peer_address
from kio.schema.types import BrokerId
from kio.static.primitive import i64
from kafka_protocol.security.client_login import AuthenticationError
from kafka_protocol.client_codec import ResponseError
from kafka_protocol.controller_schemas import (
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
_SHUTDOWN_RETRY_S = 0.2      # between ControlledShutdown requests that left partitions led (or found no controller)


class ClusterNode:
    def __init__(self, zk_connect: str, broker_id: int, host: str, port: int, *,
                 listeners: tuple[tuple[str, str, str, int], ...] = (),
                 session_timeout_ms: int, connection_timeout_ms: int | None, unclean_leader_election: bool,
                 auto_leader_rebalance: bool, leader_imbalance_check_s: int, controller_socket_timeout_ms: int,
                 leader_imbalance_percentage: int = 10,
                 on_view: Callable[[ClusterView], None], peer_security: PeerSecurity | None = None,
                 zk_security: ZkSecurity | None = None, rack: str | None = None) -> None:
        self.broker_id = broker_id
        self.peer_security = peer_security
        self.socket_timeout_s = controller_socket_timeout_ms / 1000.0
        self.zk = ZkClient(zk_connect, session_timeout_ms, connection_timeout_ms, zk_security)
        self.membership = BrokerMembership(self.zk, BrokerRegistration(broker_id, host, port, rack,
                                                                       listeners=listeners))
        self.watcher = ClusterWatcher(self.zk, on_view)
        self.membership.on_epoch = self.watcher.set_broker_epoch
        self.ready = threading.Event()
        self.election = ControllerElection(self.zk, broker_id)
        self.controller = ClusterController(self.zk, self.election, unclean_leader_election=unclean_leader_election,
                                            auto_leader_rebalance=auto_leader_rebalance,
                                            leader_imbalance_check_s=leader_imbalance_check_s,
                                            leader_imbalance_percentage=leader_imbalance_percentage,
                                            socket_timeout_ms=controller_socket_timeout_ms,
                                            peer_security=peer_security)
        self.election._on_elected = self.controller.start
        self.election._on_resigned = self.controller.stop

    @property
    def view(self) -> ClusterView:
        return self.watcher.view

    def start(self) -> None:
        self.connect()
        self.join()

    def connect(self) -> None:
        """Open the ZooKeeper session (before anything is registered: the cluster id is checked first)."""
        self.zk.start()

    def join(self) -> None:
        """Register this broker, follow the cluster and stand for controller."""
        self.membership.register()
        self.watcher.start()
        self.election.start()

    def stop(self) -> None:
        self.controller.stop()
        try:
            self.zk.stop()
        except Exception:   # noqa: BLE001 - a ZooKeeper already gone must not fail shutdown
            log.debug("closing the ZooKeeper session failed", exc_info=True)

    # ------------------------------------------------------------ the controller's requests

    def on_leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        return self.watcher.update_from_controller(lambda v, f: role_requests.apply_leader_and_isr(v, f, req))

    def on_update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        response = self.watcher.update_from_controller(lambda v, f: role_requests.apply_update_metadata(v, f, req))
        if response.error_code == 0:
            self.ready.set()
        return response

    def on_stop_replica(self, req: StopReplicaRequest) -> tuple[StopReplicaResponse, list[tuple[TopicPartition, bool]]]:
        def apply(v: ClusterView, f: role_requests.Fence) -> tuple[ClusterView, role_requests.Fence, tuple[
                StopReplicaResponse, list[tuple[TopicPartition, bool]]]]:
            view, fence, response, stopped = role_requests.apply_stop_replica(v, f, req)
            return view, fence, (response, stopped)
        return self.watcher.update_from_controller(apply)

    # ------------------------------------------------------------ admin

    def live_brokers(self) -> list[int]:
        return sorted(self.view.brokers)

    def live_racks(self) -> dict[int, str | None]:
        """Each live broker's rack (None: it has none)."""
        return {b: reg.rack for b, reg in sorted(self.view.brokers.items())}

    def create_topic(self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str],
                     validate_only: bool = False, assignment: dict[int, list[int]] | None = None) -> TopicAssignment:
        """A new topic: assigned as Kafka assigns, or as `assignment` says (checked as Kafka checks it)."""
        live = self.live_brokers()
        if assignment is not None:
            check_new_topic(assignment)
        elif replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(live)}.")
        if validate_only:
            return TopicAssignment(name, assignment or assign_replicas(self.live_racks(), partitions,
                                                                       replication_factor))
        return create_topic(self.zk, name, partitions, replication_factor, self.live_racks(), config, assignment)

    def delete_topic(self, name: str) -> None:
        if name not in self.view.topics:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist")
        request_topic_deletion(self.zk, name)

    def create_partitions(self, name: str, count: int, validate_only: bool = False,
                          assignments: list[list[int]] | None = None) -> None:
        """Add partitions to `name` up to `count`, assigned as Kafka assigns new partitions or as `assignments`
        (one broker list per new partition) say."""
        kazoo = self.zk.kazoo
        try:
            data, stat = kazoo.get(zk_layout.topic_path(name))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist") from None
        current = TopicAssignment.decode(name, data)
        old = len(current.partitions)
        if count <= old:
            raise InvalidPartitionsError(f"Topic '{name}' currently has {old} partitions, {count} would not be an "
                                         "increase.")
        rf = len(current.partitions[0])
        if assignments is not None:
            extra = check_new_partitions(assignments, count - old, rf, self.live_brokers(), old)
        else:
            extra = assign_replicas(self.live_racks(), count - old, rf, first_partition=old)
        if validate_only:
            return
        partitions = {**current.partitions, **extra}
        new = TopicAssignment(name, partitions, current.topic_id, current.adding, current.removing)
        try:
            kazoo.set(zk_layout.topic_path(name), new.encode(), stat.version)
        except BadVersionError:
            raise InvalidPartitionsError(f"Topic '{name}' changed while adding partitions; try again") from None

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """A topic's overrides, for every broker: `/config/topics/<name>` (Kafka's JSON), which each
        broker's view follows."""
        path = zk_layout.topic_config_path(name)
        data = zk_layout.encode_topic_config(config)
        try:
            self.zk.kazoo.set(path, data)
        except NoNodeError:
            try:
                self.zk.kazoo.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.kazoo.set(path, data)

    # ------------------------------------------------------------ a leader's ISR change

    def write_isr(self, tp: tuple[str, int], state: PartitionState, version: int) -> int:
        """Write `state` if the znode is still at `version`; its new version. BadVersionError if it moved."""
        topic, partition = tp
        stat = self.zk.kazoo.set(zk_layout.partition_state_path(topic, partition), state.encode(), version)
        try:
            self.zk.kazoo.create(f"{zk_layout.ISR_CHANGES}/{zk_layout.ISR_CHANGE_PREFIX}",
                                 zk_layout.encode_isr_change([tp]), sequence=True)
        except NoNodeError:
            pass
        return int(stat.version)

    # ------------------------------------------------------------ the cluster id

    def cluster_id(self, proposed: str) -> tuple[str, bool]:
        """The cluster's id from `/cluster/id` (Kafka's JSON), created with `proposed` by the first broker, and
        whether this call created it."""
        kazoo = self.zk.kazoo
        try:
            kazoo.create(zk_layout.CLUSTER_ID, json.dumps({"version": "1", "id": proposed}).encode(), makepath=True)
            return proposed, True
        except NodeExistsError:
            pass
        data, _ = kazoo.get(zk_layout.CLUSTER_ID)
        return str(json.loads(data)["id"]), False

    def register_local_topics(self, topics: list[TopicInfo]) -> list[str]:
        """A new cluster seeded by this broker's data: its topics (not yet in ZooKeeper) become the cluster's, with
        their ids and configs, each partition on this broker alone; the controller then makes it their leader.
        Their replication factor grows by reassignment once more brokers join."""
        kazoo = self.zk.kazoo
        registered = []
        if topics:
            kazoo.ensure_path(zk_layout.TOPICS)
            kazoo.ensure_path(zk_layout.TOPIC_CONFIGS)
        for info in topics:
            if kazoo.exists(zk_layout.topic_path(info.name)):
                continue
            assignment = TopicAssignment(info.name, {p: [self.broker_id] for p in range(info.partitions)},
                                         info.topic_id)
            tx = kazoo.transaction()
            if info.overrides:
                tx.create(zk_layout.topic_config_path(info.name), zk_layout.encode_topic_config(info.overrides))
            tx.create(zk_layout.topic_path(info.name), assignment.encode())
            if not any(isinstance(r, Exception) for r in tx.commit()):
                registered.append(info.name)
        if registered:
            log.info("broker %d seeded the new cluster with the topics on its disk: %s", self.broker_id,
                     ", ".join(registered))
        return registered

    # ------------------------------------------------------------ producer ids

    def producer_id_block(self) -> tuple[int, int]:
        """A block of producer ids [start, end] no other broker will use (Kafka's ZooKeeper scheme)."""
        kazoo = self.zk.kazoo
        for _ in range(100):
            try:
                data, stat = kazoo.get(zk_layout.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    kazoo.create(zk_layout.PRODUCER_ID_BLOCK, b"", makepath=True)
                except NodeExistsError:
                    pass
                continue
            start = 0
            if data:
                last = json.loads(data)
                start = int(last["block_end"]) + 1
            end = start + PRODUCER_ID_BLOCK_SIZE - 1
            value = {"version": 1, "broker": self.broker_id, "block_start": str(start), "block_end": str(end)}
            try:
                kazoo.set(zk_layout.PRODUCER_ID_BLOCK, json.dumps(value).encode(), stat.version)
                return start, end
            except BadVersionError:
                continue
        raise RuntimeError("could not claim a producer id block from ZooKeeper after 100 attempts")

    # ------------------------------------------------------------ controlled shutdown

    def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away (ControlledShutdown, as Kafka's brokers ask);
        True once the view shows none left that could move. Never waits longer than `timeout_s`, the controller or
        ZooKeeper down included: a SIGTERM must stop the broker whatever the state of the cluster."""
        deadline = time.monotonic() + timeout_s
        connection: PeerConnection | None = None
        try:
            while time.monotonic() < deadline:
                if not self.leads_anything_replicated():
                    return True
                answer, connection = self._ask_controller(connection, deadline)
                if answer is not None and answer[0] == ErrorCode.none and not answer[1]:
                    # moved: wait for the controller's LeaderAndIsr to reach this broker's view
                    while time.monotonic() < deadline and self.leads_anything_replicated():
                        time.sleep(0.02)
                    continue
                time.sleep(min(_SHUTDOWN_RETRY_S, max(deadline - time.monotonic(), 0.0)))
            return not self.leads_anything_replicated()
        finally:
            if connection is not None:
                connection.close()

    def _ask_controller(self, connection: PeerConnection | None, deadline: float
                        ) -> tuple[tuple[ErrorCode, list[tuple[str, int]]] | None, PeerConnection | None]:
        """One ControlledShutdown to the controller the view names: (error, partitions still led) or None when it
        could not be asked; and the connection, kept for the next ask while the controller stays the same."""
        view = self.view
        left = max(deadline - time.monotonic(), 0.01)
        if view.controller_id == self.broker_id and self.controller.active:
            try:
                return self.controller.controlled_shutdown(self.broker_id, self.watcher.broker_epoch).result(left), \
                    connection
            except Exception as e:   # noqa: BLE001 - a timeout or a ZooKeeper failure: ask again, or stop
                log.info("controlled shutdown: this broker's controller did not answer (%s)", type(e).__name__)
                return None, connection
        registration = view.brokers.get(view.controller_id)
        if registration is None:
            return None, connection
        host, port = peer_address(self.peer_security, registration)
        if connection is not None and (connection.host, connection.port) != (host, port):
            connection.close()
            connection = None
        if connection is None:
            connection = PeerConnection(host, port, f"broker-{self.broker_id}", min(left, self.socket_timeout_s),
                                        self.peer_security)
        try:
            answer = connection.call(ControlledShutdownRequest(broker_id=BrokerId(self.broker_id),
                                                               broker_epoch=i64(self.watcher.broker_epoch)))
        except (OSError, ResponseError, AuthenticationError) as e:
            connection.close()
            log.info("controlled shutdown: the controller (broker %d) could not be asked (%s)", view.controller_id, e)
            return None, None
        remaining = [(str(r.topic_name), int(r.partition_index)) for r in answer.remaining_partitions]
        if answer.error_code != ErrorCode.none or remaining:
            log.info("controlled shutdown: the controller (broker %d) answered %s, %d partition(s) still led",
                     view.controller_id, answer.error_code.name, len(remaining))
        return (answer.error_code, remaining), connection

    def leads_anything_replicated(self) -> bool:
        """Whether this broker leads a partition that has another live replica in its ISR."""
        view = self.view
        for sv in view.states.values():
            s = sv.state
            if s.leader == self.broker_id and any(r != self.broker_id and r in view.brokers for r in s.isr):
                return True
        return False


def node_settings(config: Any) -> dict[str, Any]:
    """The ClusterNode keyword settings from a BrokerConfig."""
    return {
        "session_timeout_ms": config["zookeeper.session.timeout.ms"],
        "connection_timeout_ms": config["zookeeper.connection.timeout.ms"],
        "unclean_leader_election": config["unclean.leader.election.enable"],
        "auto_leader_rebalance": config["auto.leader.rebalance.enable"],
        "leader_imbalance_check_s": config["leader.imbalance.check.interval.seconds"],
        "leader_imbalance_percentage": config["leader.imbalance.per.broker.percentage"],
        "controller_socket_timeout_ms": config["controller.socket.timeout.ms"],
        "zk_security": zk_security(config),
        "rack": config["broker.rack"],
    }
