"""Broker registration and the set of live brokers, as Kafka keeps them in ZooKeeper.

Owns this broker's ephemeral `/brokers/ids/<broker.id>` node and the view of every live broker's
registration. Invariants:

- a broker id is registered by one session at a time. A node held by another session is waited
  for up to one session timeout (plus 2 s): a broker restarted right after a crash finds its old
  session's node, which ZooKeeper removes within that time. A node that outlives the wait belongs
  to a live broker with the same `broker.id`: `BrokerIdInUseError`, and the broker does not start,
  as Kafka refuses;
- after a session expiry the registration is re-created in the new session;
- each registration has a broker epoch, the czxid of its znode: the controller stamps its requests
  with it, and a broker refuses requests meant for an earlier registration of itself;
- `live()` is the latest complete view (ids and their registrations); listeners get every change,
  on kazoo's thread, in order.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from broker.cluster import zk_layout
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, ZkDataError

log = logging.getLogger(__name__)

LiveBrokers = Mapping[int, BrokerRegistration]


class BrokerIdInUseError(RuntimeError):
    """Another live broker holds this broker.id in ZooKeeper."""


class BrokerMembership:
    def __init__(self, zk: ZkClient, registration: BrokerRegistration) -> None:
        self.zk = zk
        self.registration = registration
        self._live: dict[int, BrokerRegistration] = {}
        self._listeners: list[Callable[[LiveBrokers], None]] = []
        self._lock = threading.Lock()
        # called with the czxid of each registration of ours (Kafka's broker epoch)
        self.on_epoch: Callable[[int], None] = lambda _epoch: None
        zk.on_new_session(self.register)


    def register(self) -> None:
        path = zk_layout.broker_path(self.registration.broker_id)
        data = BrokerRegistration(**{**self.registration.__dict__, "timestamp_ms": int(time.time() * 1000)}).encode()
        deadline = time.monotonic() + self.zk.session_timeout_ms / 1000.0 + 2.0
        while True:
            try:
                _, stat = self.zk.kazoo.create(path, data, ephemeral=True, makepath=True, include_data=True)
                self.on_epoch(stat.czxid)
                return
            except NodeExistsError:
                try:
                    _, stat = self.zk.kazoo.get(path)
                except NoNodeError:
                    continue           # its session just ended: try again
                if stat.ephemeralOwner == self.zk.session_id:
                    self.on_epoch(stat.czxid)
                    return             # ours already (a retried create)
                if time.monotonic() > deadline:
                    raise BrokerIdInUseError(
                        f"broker.id {self.registration.broker_id} is registered at {path} by another live "
                        f"ZooKeeper session ({stat.ephemeralOwner:#x}); give each broker its own broker.id") from None
                log.info("%s is held by session %#x; waiting for it to expire", path, stat.ephemeralOwner)
                time.sleep(0.5)

    def watch(self, listener: Callable[[LiveBrokers], None] | None = None) -> None:
        """Follow /brokers/ids; `listener` gets the whole live set after every change."""
        if listener is not None:
            self._listeners.append(listener)
        ChildrenWatch(self.zk.kazoo, zk_layout.BROKER_IDS, self._on_children)

    def live(self) -> dict[int, BrokerRegistration]:
        with self._lock:
            return dict(self._live)

    def _on_children(self, children: list[str]) -> None:
        live = read_registrations(self.zk, children)
        with self._lock:
            self._live = live
        for listener in self._listeners:
            listener(dict(live))


def read_registrations(zk: ZkClient, children: list[str]) -> dict[int, BrokerRegistration]:
    """The registrations of the broker ids `children` of /brokers/ids (ids gone meanwhile left out)."""
    return {b: reg for b, (reg, _epoch) in read_live_brokers(zk, children).items()}


def read_live_brokers(zk: ZkClient, children: list[str]) -> dict[int, tuple[BrokerRegistration, int]]:
    """Each live broker's registration and broker epoch (its znode's czxid: a new one per registration)."""
    live: dict[int, tuple[BrokerRegistration, int]] = {}
    for child in children:
        if not child.isdigit():
            continue
        try:
            data, stat = zk.kazoo.get(zk_layout.broker_path(int(child)))
            live[int(child)] = (BrokerRegistration.decode(int(child), data), int(stat.czxid))
        except NoNodeError:
            continue                       # gone between the listing and the read
        except ZkDataError as e:
            log.warning("ignoring broker %s: %s", child, e)
    return live
