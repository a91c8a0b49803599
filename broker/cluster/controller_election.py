"""Controller election through the ephemeral `/controller` node, fenced by `/controller_epoch`.

Owns which broker is the cluster's controller and the fencing token its writes carry, as Kafka's
ZooKeeper mode does (KafkaZkClient.registerControllerAndIncrementControllerEpoch):

- every broker contends; winning is ONE ZooKeeper transaction that checks the version of
  `/controller_epoch`, creates the ephemeral `/controller` and stores epoch + 1. Two brokers can
  never both win an epoch, and the epoch only grows;
- a broker that wins holds a `ControllerToken` (its epoch and the epoch node's version). Every
  controller write goes through `commit_fenced`, a transaction that first checks the epoch node
  is still at that version: a deposed controller (a zombie after a pause, or one that lost its
  session) gets `ControllerMovedError` and changes nothing;
- when `/controller` disappears (the controller's session ended, or an operator deleted it to
  force a new election, as with Kafka), every live broker contends again;
- `on_elected(token)` and `on_resigned()` run on kazoo's thread, in order, once per change.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from broker.cluster import zk_layout
from broker.cluster.zk_client import ZkClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerToken:
    broker_id: int
    epoch: int
    epoch_zk_version: int


class ControllerMovedError(RuntimeError):
    """A controller write was refused: another controller has been elected since this one won."""


class ControllerElection:
    def __init__(self, zk: ZkClient, broker_id: int,
                 on_elected: Callable[[ControllerToken], None] | None = None,
                 on_resigned: Callable[[], None] | None = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._token: ControllerToken | None = None
        self._active: int = -1
        self._lock = threading.RLock()
        zk.on_session_lost(self._resign)
        zk.on_new_session(self._contend)

    # ------------------------------------------------------------ state

    @property
    def token(self) -> ControllerToken | None:
        """This broker's fencing token while it is the controller, else None."""
        with self._lock:
            return self._token

    @property
    def active_controller(self) -> int:
        """The controller's broker id as last seen in /controller, -1 while there is none."""
        with self._lock:
            return self._active

    def start(self) -> None:
        """Contend now and whenever /controller disappears."""
        DataWatch(self.zk.kazoo, zk_layout.CONTROLLER, self._on_controller_node)

    # ------------------------------------------------------------ election

    def _on_controller_node(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        if stat is None:
            with self._lock:
                self._active = -1
            if self._token is not None:
                self._resign()
            self._contend()
            return
        try:
            active = zk_layout.decode_controller(data)
        except zk_layout.ZkDataError as e:
            log.warning("%s", e)
            return
        with self._lock:
            self._active = active
            mine = self._token is not None
        if mine and (active != self.broker_id or stat.ephemeralOwner != self.zk.session_id):
            self._resign()

    def _contend(self) -> None:
        kazoo = self.zk.kazoo
        for _ in range(10):
            epoch, version = self._read_epoch()
            tx = kazoo.transaction()
            tx.check(zk_layout.CONTROLLER_EPOCH, version)
            tx.create(zk_layout.CONTROLLER, zk_layout.encode_controller(self.broker_id, int(time.time() * 1000)),
                      ephemeral=True)
            tx.set_data(zk_layout.CONTROLLER_EPOCH, zk_layout.encode_controller_epoch(epoch + 1), version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                token = ControllerToken(self.broker_id, epoch + 1, version + 1)
                with self._lock:
                    self._token = token
                    self._active = self.broker_id
                log.info("broker %d is the controller, epoch %d", self.broker_id, token.epoch)
                if self._on_elected is not None:
                    self._on_elected(token)
                return
            if isinstance(results[1], NodeExistsError):
                return        # someone else is the controller; the watch tells us when that ends
            # the epoch moved under us (another broker won and its node already went): read again
        log.warning("broker %d gave up contending for controller after 10 conflicting attempts", self.broker_id)

    def _read_epoch(self) -> tuple[int, int]:
        kazoo = self.zk.kazoo
        try:
            data, stat = kazoo.get(zk_layout.CONTROLLER_EPOCH)
            return zk_layout.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                kazoo.create(zk_layout.CONTROLLER_EPOCH, zk_layout.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = kazoo.get(zk_layout.CONTROLLER_EPOCH)
            return zk_layout.decode_controller_epoch(data), stat.version

    def _resign(self) -> None:
        with self._lock:
            was = self._token
            self._token = None
        if was is not None:
            log.info("broker %d is no longer the controller (epoch %d)", self.broker_id, was.epoch)
            if self._on_resigned is not None:
                self._on_resigned()

    # ------------------------------------------------------------ fenced writes

    def commit_fenced(self, token: ControllerToken, build: Callable[[Any], None]) -> list[Any]:
        """Run the writes `build(transaction)` adds, only if `token` is still the current epoch.

        Raises ControllerMovedError when another controller has been elected since `token` was
        issued; any other failed operation raises its own kazoo error, and an answer that does not
        come within the session timeout KazooTimeoutError. Nothing is written then.
        """
        return self.fenced_results(token, self.commit_fenced_async(token, build))

    def commit_fenced_async(self, token: ControllerToken, build: Callable[[Any], None]) -> Any:
        """`commit_fenced`'s transaction, sent without waiting: many can be in flight, and ZooKeeper commits them
        together. `fenced_results` waits for one and raises as `commit_fenced` does."""
        tx = self.zk.kazoo.transaction()
        tx.check(zk_layout.CONTROLLER_EPOCH, token.epoch_zk_version)
        build(tx)
        return tx.commit_async()

    def fenced_results(self, token: ControllerToken, pending: Any) -> list[Any]:
        results = pending.get(timeout=self.zk.session_timeout_ms / 1000.0)
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                f"broker {token.broker_id}'s controller epoch {token.epoch} is over; a newer controller was elected")
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failed:
            raise failed[0]
        return list(results[1:])
