"""The controller's work while this broker holds the controller epoch: topics, partitions, leaders, ISR.

Owns the partition states in ZooKeeper (`/brokers/topics/<t>/partitions/<p>/state`), as Kafka's
ZooKeeper-mode controller (KafkaController) does:

- a new topic, or new partitions of one (an assignment under `/brokers/topics` without states):
  each partition gets its first live replica as leader and its live replicas as ISR, epoch 0;
- a change of the live brokers (`/brokers/ids`): offline replicas leave the ISR, partitions whose
  leader went elect one from the ISR (leader_election.py), a returning ISR replica leads a
  partition that had no leader;
- a deletion request (`/admin/delete_topics/<t>`): the topic's znodes and config go, then the request;
- a ControlledShutdown request (API 7, sent by a broker on SIGTERM to the controller, as Kafka 3.9's
  ZooKeeper-mode brokers do; `controlled_shutdown`): that broker counts as gone for leadership (its
  partitions elect another ISR leader, it leaves the ISRs) except where no other ISR replica is live, where it
  keeps leading; the answer names the partitions it still leads that could have moved (the broker asks
  again); it counts as shutting down until its registration goes or is renewed;
- preferred leaders (`auto.leader.rebalance.enable`): every `leader.imbalance.check.interval.seconds`,
  for each broker more than `leader.imbalance.per.broker.percentage` % of whose preferred partitions are led
  elsewhere, those partitions whose first assigned replica is live and in sync move their leadership back;
- partition reassignment (KIP-455: AlterPartitionReassignments through `alter_reassignments`, or the
  ZooKeeper-era request `/admin/reassign_partitions`, read when it is created; its partitions leave it as
  they complete or fail, an API request for one of them takes it over, and the znode goes once empty);
- an election outside the ISR (`unclean.leader.election.enable`, or ElectLeaders UNCLEAN) is logged per
  partition as the data loss it is, and counted;
- ISR change notifications (`/isr_change_notification`): the named partitions' states are read
  again and sent to every broker in UpdateMetadata, then the notifications are deleted, as Kafka's;
- brokers learn all of this on the wire (`controller_channel`, requests built by `role_requests`):
  every partition whose state the controller wrote or read anew goes out as LeaderAndIsr to its live
  replicas when its leader or leader epoch changed, and as UpdateMetadata to every live broker; a
  broker that joins, or registers anew after losing its session (a new broker epoch), first gets a
  full LeaderAndIsr of everything it replicates and a full UpdateMetadata; a new controller term
  starts with nothing known, so it sends every state it reads; a deleted topic's partitions get
  StopReplica (delete) at their replicas and leader -2 in UpdateMetadata;
- a leader's ISR write can race with a controller write on the same state znode; the loser sees
  the new version and the controller reads the state again (a few attempts);
- every write goes through `ControllerElection.commit_fenced` with the token this controller was
  elected with, so a deposed controller writes nothing (ControllerMovedError ends its work);
- ZooKeeper watches only enqueue events; one worker thread handles them in order (Kafka's single
  controller event thread), so state is never changed by two handlers at once.

`create_topic` is the admin side (any broker): it writes the assignment and config the controller
then acts on, with Kafka's errors (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR).
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Mapping

from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.cluster import zk_layout
from broker.cluster.assignment import assign_replicas
from broker.cluster.controller_channel import BrokerAddress, ControllerChannel
from broker.cluster.controller_election import ControllerElection, ControllerMovedError, ControllerToken
from broker.cluster.leader_election import initial_state, is_unclean, next_state, rebalance_candidates
from broker.cluster.membership import read_live_brokers
from broker.cluster.reassignment import Move, completed_state, reassign_to, target_problem
from broker.cluster.role_requests import ControllerStamp, PartitionInfo, leader_and_isr, stop_replica, update_metadata
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment, ZkDataError
from broker.security.inter_broker import PeerSecurity
from kafka_protocol.quiet_logging import quiet
from kafka_protocol.errors import ErrorCode, NotControllerError, TopicAlreadyExistsError

log = logging.getLogger(__name__)
quiet_log = quiet(logging.getLogger(__name__ + ".zookeeper"))


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int,
                 live_brokers: Mapping[int, str | None], config: Mapping[str, str] | None = None,
                 explicit: dict[int, list[int]] | None = None) -> TopicAssignment:
    """Write a new topic's assignment (Kafka's rule over the live brokers and their racks, or `explicit`) and
    config; the controller does the rest."""
    replicas = explicit if explicit is not None else assign_replicas(live_brokers, partitions, replication_factor)
    assignment = TopicAssignment(topic, replicas, uuid.uuid4())
    tx = zk.kazoo.transaction()
    if config:
        tx.create(zk_layout.topic_config_path(topic), zk_layout.encode_topic_config(config))
    tx.create(zk_layout.topic_path(topic), assignment.encode())
    results = tx.commit()
    if any(isinstance(r, NodeExistsError) for r in results):
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise failed[0]
    return assignment


def request_topic_deletion(zk: ZkClient, topic: str) -> None:
    try:
        zk.kazoo.create(zk_layout.delete_topic_path(topic), b"")
    except NodeExistsError:
        pass


def _answer(done: "concurrent.futures.Future[Any]", work: Callable[[], Any]) -> None:
    """Answer a request handler's future from the event thread with `work()`, whatever happens: its exception is
    set on the future (the request gets an answer), then raised (the event thread logs it)."""
    try:
        done.set_result(work())
    except Exception as e:   # noqa: BLE001
        done.set_exception(e)
        raise


@dataclass
class _TopicPlan:
    """One topic's writes in `_update_topics`: states to create, states to update (with the version read), the
    states before an update, the partitions left as they are, and missing parent znodes."""
    topic: str
    assignment: TopicAssignment
    creates: list[tuple[int, PartitionState]] = field(default_factory=list)
    updates: list[tuple[int, PartitionState, int]] = field(default_factory=list)
    before: dict[int, PartitionState] = field(default_factory=dict)
    current: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)
    parents: list[str] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        return bool(self.creates or self.updates)

    def build(self, tx: Any) -> None:
        for parent in self.parents:
            tx.create(parent, b"")
        for p, state in self.creates:
            tx.create(zk_layout.partition_state_path(self.topic, p), state.encode())
        for p, state, version in self.updates:
            tx.set_data(zk_layout.partition_state_path(self.topic, p), state.encode(), version)


class ClusterController:
    """Runs on the controller only: `start(token)` when elected, `stop()` when it resigns."""

    def __init__(self, zk: ZkClient, election: ControllerElection, *, unclean_leader_election: bool = False,
                 auto_leader_rebalance: bool = False, leader_imbalance_check_s: float = 300.0,
                 leader_imbalance_percentage: int = 10, socket_timeout_ms: int = 30000, peer_security: PeerSecurity | None = None) -> None:
        self.zk = zk
        self.peer_security = peer_security
        self.peer_listener = peer_security.listener if peer_security is not None else "PLAINTEXT"
        self.election = election
        self.unclean = unclean_leader_election
        self.auto_leader_rebalance = auto_leader_rebalance
        self.leader_imbalance_check_s = leader_imbalance_check_s
        self.leader_imbalance_percentage = leader_imbalance_percentage
        self.unclean_elections = 0            # leaders this controller elected from outside the ISR (metrics)
        self._shutting_down: set[int] = set()
        self._events: "queue.Queue[tuple[str, Any] | None]" = queue.Queue()
        self._token: ControllerToken | None = None
        self._live: set[int] = set()
        self._registrations: dict[int, BrokerRegistration] = {}
        self._broker_epochs: dict[int, int] = {}
        self._known: dict[tuple[str, int], PartitionInfo] = {}     # what the brokers were last sent
        self._channel: ControllerChannel | None = None
        self.socket_timeout_s = socket_timeout_ms / 1000.0
        self._assignments: dict[str, TopicAssignment] = {}
        self._watched: set[str] = set()   # topics with a data watch in this term
        self._thread: threading.Thread | None = None
        self._generation = 0          # watches of an earlier term stop themselves
        self._isr_lock = threading.Lock()
        self._isr_queued = False      # an isr_changes event is queued and has not started

    # ------------------------------------------------------------ lifecycle

    def start(self, token: ControllerToken) -> None:
        """Become the controller: the watches queue the cluster's state (brokers, topics, moves) first, and only
        then are requests taken (`_token` set) and the event thread started, so a request asked of a new
        controller is answered after it has read every topic, never from an empty or a former term's view."""
        self._generation += 1
        self._isr_queued = False
        generation = self._generation
        self._watched = set()
        self._live = set()
        self._registrations = {}
        self._broker_epochs = {}
        self._shutting_down = set()
        self._known = {}
        self._assignments = {}
        if self._channel is not None:
            self._channel.stop()
        self._channel = ControllerChannel(token.broker_id, self.socket_timeout_s, self.peer_security)
        self._events = queue.Queue()          # a term's own: a former term's thread may not have ended yet
        self._watch(generation)
        self._token = token
        self._thread = threading.Thread(target=self._run, args=(self._events,), name=f"controller-epoch-{token.epoch}",
                                        daemon=True)
        self._thread.start()
        if self.auto_leader_rebalance:
            threading.Thread(target=self._rebalance_timer, args=(generation,), daemon=True,
                             name=f"preferred-leader-{token.epoch}").start()

    def _watch(self, generation: int) -> None:
        """ZooKeeper's watches of this term, each queueing an event (their first call, at once, the current state)."""
        kazoo = self.zk.kazoo

        def alive(handler: Callable[..., None]) -> Callable[..., bool]:
            def watch(*args: Any) -> bool:
                if generation != self._generation:
                    return False          # a later term (or a resignation): stop watching
                handler(*args)
                return True
            return watch

        ChildrenWatch(kazoo, zk_layout.BROKER_IDS, alive(lambda ids: self._events.put(("brokers", ids))))
        ChildrenWatch(kazoo, zk_layout.TOPICS, alive(lambda topics: self._events.put(("topics", topics))))
        ChildrenWatch(kazoo, zk_layout.DELETE_TOPICS, alive(lambda topics: self._events.put(("delete", topics))))
        ChildrenWatch(kazoo, zk_layout.ISR_CHANGES, alive(lambda names: self._queue_isr_changes(bool(names))))
        created: list[int | None] = [None]       # the czxid of the reassignment znode last seen

        def on_reassign_node(_data: bytes | None, stat: Any) -> None:
            # as Kafka's PartitionReassignmentHandler: a new znode is a request; the controller's own rewrites
            # of it (partitions removed as they complete) are not
            czxid = stat.czxid if stat is not None else None
            if czxid is not None and czxid != created[0]:
                self._events.put(("zk_reassign", None))
            created[0] = czxid
        DataWatch(kazoo, zk_layout.REASSIGN_PARTITIONS, alive(on_reassign_node))

    @property
    def active(self) -> bool:
        """This broker is the controller now (elected, not yet resigned)."""
        return self._token is not None

    def stop(self) -> None:
        self._generation += 1
        self._token = None
        self._events.put(None)
        if self._channel is not None:
            self._channel.stop()

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Block until every queued event has been handled (for tests and orderly shutdown)."""
        done = threading.Event()
        self._events.put(("barrier", done))
        if not done.wait(timeout_s):
            raise TimeoutError(f"controller events still pending after {timeout_s}s")

    # ------------------------------------------------------------ the event thread

    def _run(self, events: "queue.Queue[tuple[str, Any] | None]") -> None:
        while True:
            event = events.get()
            if event is None or self._token is None:
                return
            kind, arg = event
            try:
                getattr(self, f"_on_{kind}")(arg)
            except ControllerMovedError as e:
                log.warning("%s; this broker stops acting as controller", e)
                self._token = None
                return
            except (ConnectionLoss, SessionExpiredError) as e:    # ZooKeeper went away: one line, no trace
                quiet_log.warning("controller event %s not handled: ZooKeeper %s", kind, type(e).__name__)
            except Exception:   # noqa: BLE001 (one bad event must not stop the controller)
                log.exception("controller event %s failed", kind)

    def _on_barrier(self, done: threading.Event) -> None:
        done.set()

    def _rebalance_timer(self, generation: int) -> None:
        while generation == self._generation:
            time.sleep(self.leader_imbalance_check_s)
            if generation == self._generation:
                self._events.put(("rebalance", None))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int
                            ) -> "concurrent.futures.Future[tuple[ErrorCode, list[tuple[str, int]]]]":
        """ControlledShutdown, from a request handler's thread: (error, partitions `broker_id` still leads that
        could move), once the controller thread has moved its leaderships (when this broker is not the controller:
        STALE_CONTROLLER_EPOCH, Kafka's code for its ControllerMovedException)."""
        done: "concurrent.futures.Future[tuple[ErrorCode, list[tuple[str, int]]]]" = concurrent.futures.Future()
        if self._token is None:
            done.set_result((ErrorCode.stale_controller_epoch, []))
        else:
            self._events.put(("controlled_shutdown", (broker_id, broker_epoch, done)))
        return done

    def _on_controlled_shutdown(self, arg: tuple[int, int, "concurrent.futures.Future[Any]"]) -> None:
        broker_id, broker_epoch, done = arg
        _answer(done, lambda: self._shut_down(broker_id, broker_epoch))

    def _shut_down(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        """Kafka's doControlledShutdown: BROKER_NOT_AVAILABLE for a broker not live, STALE_BROKER_EPOCH for a request
        of its previous registration; else its leaderships move and the ones that could not are named."""
        current = self._broker_epochs.get(broker_id)
        if current is None:
            return ErrorCode.broker_not_available, []
        if broker_epoch != -1 and broker_epoch < current:
            return ErrorCode.stale_broker_epoch, []
        if broker_id not in self._shutting_down:
            log.info("controlled shutdown requested by broker %d", broker_id)
            self._shutting_down.add(broker_id)
        self._update_partitions(sorted(t for t, a in self._assignments.items()
                                       if any(broker_id in r for r in a.partitions.values())))
        live = self._live - self._shutting_down
        return ErrorCode.none, sorted(tp for tp, info in self._known.items() if info.state.leader == broker_id
                                      and any(r in live for r in info.state.isr if r != broker_id))

    def _queue_isr_changes(self, any_children: bool) -> None:
        """The notifications' watch fired: queue one event unless one is queued already. The event reads the
        children itself, so a burst of notifications (and the watch firing again as they are deleted) is
        one pass over them, not one pass per notification over all of them."""
        if not any_children:
            return
        with self._isr_lock:
            if self._isr_queued:
                return
            self._isr_queued = True
        self._events.put(("isr_changes", None))

    def _on_isr_changes(self, _: None) -> None:
        kazoo = self.zk.kazoo
        with self._isr_lock:
            self._isr_queued = False       # notifications from now on queue a new pass
        names = kazoo.get_children(zk_layout.ISR_CHANGES)
        if not names:
            return
        paths = [f"{zk_layout.ISR_CHANGES}/{name}" for name in names]
        changed: set[tuple[str, int]] = set()
        for path, pending in zip(paths, [kazoo.get_async(p) for p in paths]):      # pipelined, not one by one
            try:
                changed.update(zk_layout.decode_isr_change(path, pending.get()[0]))
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.warning("%s", e)
        wanted = [(topic, p) for topic, p in sorted(changed)
                  if (a := self._assignments.get(topic)) is not None and p in a.partitions]
        infos: dict[tuple[str, int], PartitionInfo] = {}
        reads = [kazoo.get_async(zk_layout.partition_state_path(topic, p)) for topic, p in wanted]
        for (topic, p), pending in zip(wanted, reads):
            assignment = self._assignments[topic]
            try:
                data, stat = pending.get()
                infos[(topic, p)] = PartitionInfo(PartitionState.decode(topic, p, data), stat.version,
                                                  tuple(assignment.partitions[p]), assignment.topic_id)
            except (NoNodeError, ZkDataError):
                continue
        self._publish(infos)
        for pending in [kazoo.delete_async(path) for path in paths]:
            try:
                pending.get()
            except NoNodeError:
                pass
        for topic, p in wanted:     # a moving partition's new replicas joined the ISR: its move may complete
            self._maybe_complete_move(topic, p)

    def _on_rebalance(self, _: None) -> None:
        """The auto leader rebalance: preferred leaders back for brokers past the imbalance percentage."""
        known = {tp: (info.replicas, info.state) for tp, info in self._known.items()}
        moves = rebalance_candidates(known, self._live, self._shutting_down, self.leader_imbalance_percentage)
        if not moves:
            return
        log.info("auto leader rebalance: %d partitions back to their preferred replica", len(moves))
        by_topic: dict[str, set[int]] = {}
        for topic, p in moves:
            by_topic.setdefault(topic, set()).add(p)
        for topic, parts in sorted(by_topic.items()):
            self._update_partitions([topic], preferred=True, only=parts)

    def _on_brokers(self, ids: list[str]) -> None:
        registered = read_live_brokers(self.zk, ids)
        live = set(registered)
        assert self._channel is not None
        fresh = self._channel.set_brokers({b: BrokerAddress(b, *reg.address(self.peer_listener), epoch)
                                           for b, (reg, epoch) in registered.items()})
        self._registrations = {b: reg for b, (reg, _) in registered.items()}
        self._broker_epochs = {b: epoch for b, (_, epoch) in registered.items()}
        # a broker that left, or registered anew (restarted), is no longer shutting down
        self._shutting_down = {b for b in self._shutting_down if b in live and b not in fresh}
        if live == self._live and not fresh:
            return
        log.info("live brokers: %s (were %s; new registrations: %s)", sorted(live), sorted(self._live), fresh)
        self._live = live
        self._update_partitions(list(self._assignments))
        stamp = self._stamp()
        if stamp is None:
            return
        brokers, known = self._registrations, self._known
        for b in fresh:       # joined, or registered anew: everything it replicates, then all metadata
            theirs = {tp: info for tp, info in known.items() if b in info.replicas}
            self._channel.send(b, partial(leader_and_isr, stamp, partitions=theirs, brokers=brokers, full=True,
                                                   listener=self.peer_listener))
            self._channel.send(b, partial(update_metadata, stamp, partitions=known, brokers=brokers))
        for b in sorted(live - set(fresh)):        # the others: the new set of live brokers
            self._channel.send(b, partial(update_metadata, stamp, partitions={}, brokers=brokers))

    # ------------------------------------------------------------ telling the brokers

    def _stamp(self) -> ControllerStamp | None:
        token = self._token
        return ControllerStamp(token.broker_id, token.epoch) if token is not None else None

    def _publish(self, infos: dict[tuple[str, int], PartitionInfo]) -> None:
        """Send the brokers what changed in `infos` since they were last told: LeaderAndIsr to the live
        replicas of partitions with a new leader or epoch, UpdateMetadata to every live broker."""
        stamp, channel = self._stamp(), self._channel
        changed = {tp: info for tp, info in infos.items() if self._known.get(tp) != info}
        if stamp is None or channel is None or not changed:
            return
        roles: dict[int, dict[tuple[str, int], PartitionInfo]] = {}
        for tp, info in changed.items():
            old = self._known.get(tp)
            if old is None or (old.state.leader, old.state.leader_epoch) != (info.state.leader, info.state.leader_epoch):
                for b in info.replicas:
                    if b in self._live:
                        roles.setdefault(b, {})[tp] = info
            self._known[tp] = info
        brokers = self._registrations
        for b, theirs in sorted(roles.items()):
            channel.send(b, partial(leader_and_isr, stamp, partitions=theirs, brokers=brokers,
                                              listener=self.peer_listener))
        for b in sorted(self._live):
            channel.send(b, partial(update_metadata, stamp, partitions=changed, brokers=brokers))

    def _on_topics(self, topics: list[str]) -> None:
        for topic in topics:
            if topic not in self._watched:
                self._watched.add(topic)
                DataWatch(self.zk.kazoo, zk_layout.topic_path(topic), self._topic_watch(topic, self._generation))
        for topic in list(self._watched):
            if topic not in topics:
                self._watched.discard(topic)
                self._assignments.pop(topic, None)
                self._tell_deleted([tp for tp in self._known if tp[0] == topic])

    def _topic_watch(self, topic: str, generation: int) -> Callable[[bytes | None, Any], bool]:
        first = [True]

        def watch(data: bytes | None, stat: Any) -> bool:
            if generation != self._generation or stat is None:
                return False
            if first[0]:      # DataWatch's first call, on this thread inside _on_topics: read before any request
                first[0] = False
                self._on_assignment((topic, data))
            else:
                self._events.put(("assignment", (topic, data)))
            return True
        return watch

    def _on_assignment(self, arg: tuple[str, bytes | None]) -> None:
        topic, data = arg
        if topic not in self._watched or not self.zk.kazoo.exists(zk_layout.topic_path(topic)):
            return                        # deleted since the watch fired
        try:
            assignment = TopicAssignment.decode(topic, data)
        except ZkDataError as e:
            log.error("%s", e)
            return
        self._assignments[topic] = assignment
        self._update_partitions([topic])
        for p in sorted(set(assignment.adding) | set(assignment.removing)):    # moves a former controller began
            self._maybe_complete_move(topic, p)

    def _on_delete(self, topics: list[str]) -> None:
        kazoo = self.zk.kazoo
        for topic in topics:
            gone = [tp for tp in self._known if tp[0] == topic]
            paths = [zk_layout.topic_path(topic), zk_layout.topic_config_path(topic)]
            for path in paths:
                try:
                    kazoo.delete(path, recursive=True)
                except NoNodeError:
                    pass
            self._assignments.pop(topic, None)
            self._watched.discard(topic)
            self._tell_deleted(gone)
            try:
                kazoo.delete(zk_layout.delete_topic_path(topic))
            except NoNodeError:
                pass
            log.info("topic %s deleted", topic)

    def _tell_deleted(self, gone: list[tuple[str, int]]) -> None:
        """StopReplica (delete) to the live replicas of `gone`, and leader -2 for them in every broker's metadata."""
        stamp, channel = self._stamp(), self._channel
        if stamp is None or channel is None or not gone:
            return
        replicas: dict[int, list[tuple[str, int]]] = {}
        for tp in gone:
            for b in self._known.pop(tp).replicas:
                if b in self._live:
                    replicas.setdefault(b, []).append(tp)
        brokers = self._registrations
        for b, tps in sorted(replicas.items()):
            channel.send(b, partial(stop_replica, stamp, partitions=tps, delete=True))
        for b in sorted(self._live):
            channel.send(b, partial(update_metadata, stamp, partitions={}, brokers=brokers, deleted=gone))

    # ------------------------------------------------------------ partition states

    def _update_partitions(self, topics: list[str], preferred: bool = False, only: set[int] | None = None,
                           unclean: bool | None = None) -> None:
        """Bring every partition of `topics` in line with the live brokers, in one fenced write per topic (with
        `preferred`, preferred leaders too: for the partitions `only` names, or all; `unclean` overrides
        unclean.leader.election.enable, as ElectLeaders UNCLEAN does)."""
        infos: dict[tuple[str, int], PartitionInfo] = {}
        pending = list(topics)
        for attempt in range(5):
            done, pending = self._update_topics(pending, preferred, only, unclean, fresh=attempt > 0)
            infos.update(done)
            if not pending:
                break
            # a leader changed an ISR between our read and our write: read those topics again
            log.debug("partition states of %s changed under the controller (attempt %d)", pending, attempt + 1)
        else:
            log.warning("gave up bringing %s's partition states in line after 5 conflicting writes", pending)
        # one LeaderAndIsr per broker and one UpdateMetadata per broker for every topic of the event (Kafka's
        # ControllerBrokerRequestBatch): a broker applies each request to its whole view, so one per topic made a
        # failover of T topics cost each broker T passes over every partition it holds
        self._publish(infos)

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                      ) -> "concurrent.futures.Future[dict[tuple[str, int], tuple[ErrorCode, str | None]]]":
        """ElectLeaders (KIP-460), from a request handler's thread: each partition's outcome, once the controller
        thread has elected (NOT_CONTROLLER everywhere when this broker is not the controller)."""
        done: "concurrent.futures.Future[dict[tuple[str, int], tuple[ErrorCode, str | None]]]" = \
            concurrent.futures.Future()
        if self._token is None:
            done.set_result({tp: (ErrorCode.not_controller, None) for tp in partitions or ()})
        else:
            self._events.put(("elect", (partitions, unclean, done)))
        return done

    def _on_elect(self, arg: tuple[list[tuple[str, int]] | None, bool, "concurrent.futures.Future[Any]"]) -> None:
        wanted, unclean, done = arg
        _answer(done, lambda: self._elect(wanted, unclean))

    def _elect(self, wanted: list[tuple[str, int]] | None, unclean: bool
               ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Kafka's ZooKeeper-mode election outcomes: ELECTION_NOT_NEEDED where the leader already is the one
        the election would pick, PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE where nobody can
        be elected, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist."""
        if wanted is None:
            wanted = [(t, p) for t, a in sorted(self._assignments.items()) for p in sorted(a.partitions)]
        out: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        by_topic: dict[str, set[int]] = {}
        for topic, p in wanted:
            a = self._assignments.get(topic)
            if a is None or p not in a.partitions:
                out[(topic, p)] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            else:
                by_topic.setdefault(topic, set()).add(p)
        kazoo = self.zk.kazoo
        strategy = "UncleanPartitionLeaderElectionStrategy" if unclean else "PreferredReplicaPartitionLeaderElectionStrategy"
        for topic, ps in sorted(by_topic.items()):
            replicas_of = self._assignments[topic].partitions
            eligible = self._live - self._shutting_down
            to_elect = set()
            for p in sorted(ps):
                state = PartitionState.decode(topic, p, kazoo.get(zk_layout.partition_state_path(topic, p))[0])
                replicas = replicas_of[p]
                if unclean:
                    if state.leader in self._live:
                        out[(topic, p)] = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
                    elif not any(r in eligible for r in replicas):
                        out[(topic, p)] = (ErrorCode.eligible_leaders_not_available,
                                           f"Failed to elect leader for partition {topic}-{p} under strategy {strategy}")
                    else:
                        to_elect.add(p)
                elif state.leader == replicas[0]:
                    out[(topic, p)] = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
                elif replicas[0] not in eligible or replicas[0] not in state.isr:
                    out[(topic, p)] = (ErrorCode.preferred_leader_not_available,
                                       f"Failed to elect leader for partition {topic}-{p} under strategy {strategy}")
                else:
                    to_elect.add(p)
            if to_elect:
                self._update_partitions([topic], preferred=not unclean, only=to_elect, unclean=unclean)
            for p in sorted(to_elect):
                state = PartitionState.decode(topic, p, kazoo.get(zk_layout.partition_state_path(topic, p))[0])
                elected = state.leader in eligible and (unclean or state.leader == replicas_of[p][0])
                out[(topic, p)] = (ErrorCode.none, None) if elected else (
                    ErrorCode.preferred_leader_not_available if not unclean else ErrorCode.eligible_leaders_not_available,
                    f"Failed to elect leader for partition {topic}-{p} under strategy {strategy}")
        return out

    # ------------------------------------------------------------ reassignment (KIP-455)

    def alter_reassignments(self, wanted: dict[tuple[str, int], list[int] | None]
                            ) -> "concurrent.futures.Future[dict[tuple[str, int], tuple[ErrorCode, str | None]]]":
        """AlterPartitionReassignments, from a request handler's thread: each partition's outcome once the
        controller thread has started (or cancelled, target None) its move; NOT_CONTROLLER off the controller."""
        return self._ask("reassign", wanted, {tp: (ErrorCode.not_controller, None) for tp in wanted})

    def list_reassignments(self, wanted: list[tuple[str, int]] | None
                           ) -> "concurrent.futures.Future[dict[tuple[str, int], Move]]":
        """ListPartitionReassignments: the partitions moving now (of `wanted`, or all)."""
        return self._ask("list_moves", wanted, None)

    def _ask(self, kind: str, arg: Any, off_controller: Any) -> "concurrent.futures.Future[Any]":
        done: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        if self._token is None:
            if off_controller is None:
                done.set_exception(NotControllerError(f"broker {self.election.broker_id} is not the controller"))
            else:
                done.set_result(off_controller)
        else:
            self._events.put((kind, (arg, done)))
        return done

    def _on_reassign(self, arg: tuple[dict[tuple[str, int], list[int] | None], "concurrent.futures.Future[Any]"]
                     ) -> None:
        wanted, done = arg

        def reassign() -> Any:
            # the latest request wins: partitions the API moves leave the ZooKeeper request (Kafka's rule)
            self._remove_from_zk_reassignment(lambda tp, _target: tp in wanted)
            return self._reassign(wanted)
        _answer(done, reassign)

    def _on_zk_reassign(self, _: None) -> None:
        """`/admin/reassign_partitions` was created (by a ZooKeeper-era tool or script): start each move it asks
        for, as AlterPartitionReassignments would; partitions that cannot move leave the znode at once (logged),
        the others when their move completes, and the znode goes when it is empty (Kafka 3.9's ZooKeeper mode)."""
        try:
            data, _ = self.zk.kazoo.get(zk_layout.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        try:
            wanted = zk_layout.decode_reassignment(data)
        except ZkDataError as e:
            log.error("%s; delete it and write a valid request", e)
            return
        todo: dict[tuple[str, int], list[int] | None] = {}
        finished = set()
        for (topic, p), target in wanted.items():
            a = self._assignments.get(topic)
            if a is not None and p in a.partitions:
                move = self._move_of(topic, p)
                if list(move.target) == target:
                    if not move.moving:
                        finished.add((topic, p))       # already there
                    continue                           # already moving there (a new controller reads it again)
            todo[(topic, p)] = target
        results = self._reassign(todo) if todo else {}
        failed = {tp: message or code.name for tp, (code, message) in results.items() if code != ErrorCode.none}
        for (topic, p), why in sorted(failed.items()):
            log.warning("%s-%d: the reassignment in %s failed: %s", topic, p, zk_layout.REASSIGN_PARTITIONS, why)
        self._remove_from_zk_reassignment(lambda tp, _target: tp in failed or tp in finished)

    def _remove_from_zk_reassignment(self, drop: Callable[[tuple[str, int], list[int]], bool]) -> None:
        """Rewrite `/admin/reassign_partitions` without the partitions `drop` names (deleted once empty)."""
        token = self._token
        if token is None:
            return
        kazoo = self.zk.kazoo

        def write() -> None:
            try:
                data, stat = kazoo.get(zk_layout.REASSIGN_PARTITIONS)
                wanted = zk_layout.decode_reassignment(data)
            except (NoNodeError, ZkDataError):
                return
            left = {tp: r for tp, r in wanted.items() if not drop(tp, r)}
            if len(left) == len(wanted):
                return

            def build(tx: Any) -> None:
                if left:
                    tx.set_data(zk_layout.REASSIGN_PARTITIONS, zk_layout.encode_reassignment(left), stat.version)
                else:
                    tx.delete(zk_layout.REASSIGN_PARTITIONS, stat.version)
            self.election.commit_fenced(token, build)
        self._retried(write, f"updating {zk_layout.REASSIGN_PARTITIONS}")

    def _on_list_moves(self, arg: tuple[list[tuple[str, int]] | None, "concurrent.futures.Future[Any]"]) -> None:
        wanted, done = arg
        moves = {(t, p): self._move_of(t, p) for t, a in self._assignments.items() for p in a.partitions}
        done.set_result({tp: m for tp, m in sorted(moves.items()) if m.moving and (wanted is None or tp in wanted)})

    def _move_of(self, topic: str, p: int) -> Move:
        a = self._assignments[topic]
        return Move(tuple(a.partitions[p]), tuple(a.adding.get(p, ())), tuple(a.removing.get(p, ())))

    def _reassign(self, wanted: dict[tuple[str, int], list[int] | None]
                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        out: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        moves: dict[str, dict[int, Move]] = {}
        for (topic, p), target in sorted(wanted.items(), key=lambda kv: kv[0]):
            a = self._assignments.get(topic)
            if a is None or p not in a.partitions:
                out[(topic, p)] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
                continue
            move = self._move_of(topic, p)
            if target is None and not move.moving:
                out[(topic, p)] = (ErrorCode.no_reassignment_in_progress, None)
                continue
            goal = list(move.origin) if target is None else target
            problem = target_problem(goal, move, self._live)
            if problem is not None:
                out[(topic, p)] = (ErrorCode.invalid_replica_assignment, problem)
                continue
            moves.setdefault(topic, {})[p] = reassign_to(move, goal)
            out[(topic, p)] = (ErrorCode.none, None)
        for topic, theirs in sorted(moves.items()):
            self._retried(lambda: self._start_moves(topic, theirs), f"starting the moves of {topic}")
            for p in sorted(theirs):
                self._maybe_complete_move(topic, p)
        return out

    def _retried(self, write: Callable[[], None], what: str) -> None:
        for attempt in range(5):
            try:
                write()
                return
            except BadVersionError:     # a leader changed an ISR between our read and our write: read again
                log.debug("%s: a znode changed under the controller (attempt %d)", what, attempt + 1)
        raise RuntimeError(f"gave up {what} after 5 conflicting writes")

    def _start_moves(self, topic: str, moves: dict[int, Move]) -> None:
        """Write the moving partitions' full replica sets (RS, adding, removing) and bump their leader epochs, so
        every replica, old and new, learns the set from a LeaderAndIsr; the new ones start fetching."""
        token = self._token
        if token is None:
            return
        kazoo = self.zk.kazoo
        data, stat = kazoo.get(zk_layout.topic_path(topic))
        current = TopicAssignment.decode(topic, data)
        partitions, adding, removing = dict(current.partitions), dict(current.adding), dict(current.removing)
        dropped: dict[int, list[tuple[str, int]]] = {}
        for p, m in moves.items():
            for b in set(partitions.get(p, ())) - set(m.replicas):    # of a move this one replaces
                dropped.setdefault(b, []).append((topic, p))
            partitions[p] = list(m.replicas)
            adding[p], removing[p] = list(m.adding), list(m.removing)
        new = TopicAssignment(topic, partitions, current.topic_id, adding, removing)
        states = {p: kazoo.get(zk_layout.partition_state_path(topic, p)) for p in moves}
        bumped = {p: replace(PartitionState.decode(topic, p, d), controller_epoch=token.epoch) for p, (d, _) in
                  states.items()}
        bumped = {p: replace(s, leader_epoch=s.leader_epoch + 1) for p, s in bumped.items()}

        def build(tx: Any) -> None:
            tx.set_data(zk_layout.topic_path(topic), new.encode(), stat.version)
            for p, s in bumped.items():
                tx.set_data(zk_layout.partition_state_path(topic, p), s.encode(), states[p][1].version)

        self.election.commit_fenced(token, build)
        self._assignments[topic] = new
        for p, m in sorted(moves.items()):
            log.info("%s-%d: reassigning to %s (replicas %s, adding %s, removing %s)", topic, p, list(m.target),
                     list(m.replicas), list(m.adding), list(m.removing))
        self._publish({(topic, p): PartitionInfo(s, states[p][1].version + 1, tuple(moves[p].replicas),
                                                 new.topic_id) for p, s in bumped.items()})
        self._stop_replicas(dropped)

    def _maybe_complete_move(self, topic: str, p: int) -> None:
        a = self._assignments.get(topic)
        if a is None or p not in a.partitions or not self._move_of(topic, p).moving:
            return
        self._retried(lambda: self._complete_move(topic, p), f"completing the move of {topic}-{p}")

    def _complete_move(self, topic: str, p: int) -> None:
        """Once every target replica is in the ISR: the target alone in the topic's znode and the partition's
        state (leader kept if a target replica, removed replicas out of the ISR, a new leader epoch), then
        StopReplica (delete) to the removed replicas."""
        token = self._token
        if token is None:
            return
        kazoo = self.zk.kazoo
        move = self._move_of(topic, p)
        data, stat = kazoo.get(zk_layout.partition_state_path(topic, p))
        state = completed_state(move, PartitionState.decode(topic, p, data), self._live - self._shutting_down,
                                token.epoch)
        if state is None:
            return
        tdata, tstat = kazoo.get(zk_layout.topic_path(topic))
        current = TopicAssignment.decode(topic, tdata)
        partitions = {**current.partitions, p: list(move.target)}
        adding = {q: r for q, r in current.adding.items() if q != p}
        removing = {q: r for q, r in current.removing.items() if q != p}
        new = TopicAssignment(topic, partitions, current.topic_id, adding, removing)

        def build(tx: Any) -> None:
            tx.set_data(zk_layout.topic_path(topic), new.encode(), tstat.version)
            tx.set_data(zk_layout.partition_state_path(topic, p), state.encode(), stat.version)

        self.election.commit_fenced(token, build)
        self._assignments[topic] = new
        log.info("%s-%d: reassignment to %s completed (leader %d, epoch %d, isr %s)", topic, p, list(move.target),
                 state.leader, state.leader_epoch, list(state.isr))
        self._publish({(topic, p): PartitionInfo(state, stat.version + 1, move.target, new.topic_id)})
        self._stop_replicas({b: [(topic, p)] for b in move.removing})
        self._remove_from_zk_reassignment(lambda tp, target: tp == (topic, p) and target == list(move.target))

    def _stop_replicas(self, replicas: dict[int, list[tuple[str, int]]]) -> None:
        """StopReplica (delete) to the live brokers no longer replicas of these partitions."""
        stamp, channel = self._stamp(), self._channel
        if stamp is None or channel is None:
            return
        for b, tps in sorted(replicas.items()):
            if b in self._live and tps:
                channel.send(b, partial(stop_replica, stamp, partitions=tps, delete=True))

    def _update_topics(self, topics: list[str], preferred: bool, only: set[int] | None = None,
                       unclean: bool | None = None, fresh: bool = False
                       ) -> tuple[dict[tuple[str, int], PartitionInfo], list[str]]:
        """Write the next state of every partition of `topics` that needs one, one fenced multi per topic, as
        Kafka's controller does from its own cache: a partition's state and znode version are the ones this
        controller last wrote or read (`_known`), read from ZooKeeper only when it has none (or with `fresh`); a
        cached version that a leader's ISR write has since moved fails the multi (BadVersionError) and that topic
        is read again. Every read is sent at once, then every topic's multi before any answer is awaited, so
        ZooKeeper commits them together (one at a time, each read and waited for, a broker's loss in a 100-topic
        cluster took the controller 6.5 s). Returns every partition's state as it now stands, for the caller to
        publish, and the topics to read again."""
        token = self._token
        if token is None:
            return {}, []
        kazoo = self.zk.kazoo
        timeout_s = self.zk.session_timeout_ms / 1000.0
        current: list[tuple[str, TopicAssignment, dict[int, Any]]] = []
        for topic in topics:
            assignment = self._assignments.get(topic)
            if assignment is None:
                continue
            states: dict[int, Any] = {}
            for p, replicas in assignment.partitions.items():
                info = None if fresh else self._known.get((topic, p))
                if info is not None and info.replicas == tuple(replicas) and info.topic_id == assignment.topic_id:
                    states[p] = info
                else:
                    states[p] = kazoo.get_async(zk_layout.partition_state_path(topic, p))
            current.append((topic, assignment, states))
        plans = [self._plan_topic(token, topic, assignment, states, preferred, only, unclean, timeout_s)
                 for topic, assignment, states in current]
        commits = [(plan, self.election.commit_fenced_async(token, plan.build)) for plan in plans if plan.writes]
        infos: dict[tuple[str, int], PartitionInfo] = {}
        conflicted: list[str] = []
        for plan in plans:
            if not plan.writes:
                infos.update(plan.current)
        for plan, pending in commits:
            try:
                self.election.fenced_results(token, pending)
            except BadVersionError:
                conflicted.append(plan.topic)
                continue
            except NoNodeError:
                if not kazoo.exists(zk_layout.topic_path(plan.topic)):      # deleted meanwhile
                    self._assignments.pop(plan.topic, None)
                    continue
                conflicted.append(plan.topic)     # a state cached for a znode that is gone: read again
                continue
            infos.update(self._written(plan))
        return infos, conflicted

    def _plan_topic(self, token: ControllerToken, topic: str, assignment: TopicAssignment, states: Mapping[int, Any],
                    preferred: bool, only: set[int] | None, unclean: bool | None, timeout_s: float) -> "_TopicPlan":
        """The next state of each partition of `topic` from its current one (`states`: a cached PartitionInfo or a
        pending read, per partition)."""
        plan = _TopicPlan(topic, assignment)
        for p, replicas in sorted(assignment.partitions.items()):
            try:
                known = states[p]
                if isinstance(known, PartitionInfo):
                    current, version = known.state, known.zk_version
                else:
                    data, stat = known.get(timeout=timeout_s)
                    current, version = PartitionState.decode(topic, p, data), stat.version
            except NoNodeError:
                plan.creates.append((p, initial_state(replicas, self._live - self._shutting_down or self._live,
                                                      token.epoch)))
                continue
            new = next_state(replicas, current, self._live, self._shutting_down, token.epoch,
                             self.unclean if unclean is None else unclean,
                             preferred and (only is None or p in only))
            if new != current:
                plan.updates.append((p, new, version))
                plan.before[p] = current
            else:
                plan.current[(topic, p)] = PartitionInfo(current, version, tuple(replicas), assignment.topic_id)
        if plan.creates:
            kazoo = self.zk.kazoo
            base = f"{zk_layout.TOPICS}/{topic}/partitions"
            plan.parents = ([base] if not kazoo.exists(base) else []) + [
                f"{base}/{p}" for p, _ in plan.creates if not kazoo.exists(f"{base}/{p}")]
        return plan

    def _written(self, plan: "_TopicPlan") -> dict[tuple[str, int], PartitionInfo]:
        """A topic's states once its multi is committed (logged, unclean elections counted)."""
        topic, assignment = plan.topic, plan.assignment
        for p, state, _ in plan.updates:
            log.info("%s-%d: leader %d, epoch %d, isr %s", topic, p, state.leader, state.leader_epoch,
                     list(state.isr))
            if is_unclean(plan.before[p], state):
                self.unclean_elections += 1
                log.warning("%s-%d: unclean leader election: broker %d was not in the ISR %s; records the old ISR "
                            "acknowledged beyond broker %d's log end are lost (unclean.leader.election.enable)",
                            topic, p, state.leader, list(plan.before[p].isr), state.leader)
        written = {(topic, p): PartitionInfo(state, 0, tuple(assignment.partitions[p]), assignment.topic_id)
                   for p, state in plan.creates}
        written.update({(topic, p): PartitionInfo(state, version + 1, tuple(assignment.partitions[p]),
                                                  assignment.topic_id) for p, state, version in plan.updates})
        return {**plan.current, **written}
