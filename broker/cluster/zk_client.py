"""The broker's ZooKeeper session (kazoo): connect, Kafka's top-level paths, session events.

Owns the one kazoo client of a broker in cluster mode. `zookeeper.connect` may carry a chroot
(`host:port/kafka`), as in Kafka. A session that cannot be opened within
`zookeeper.connection.timeout.ms` is a `ZooKeeperUnavailableError` naming the connect string. When
a session expires (the broker was frozen or cut off longer than `zookeeper.session.timeout.ms`),
kazoo opens a new one; `on_new_session` callbacks then run so that ephemeral nodes (registration,
controller) are re-created, as Kafka re-registers after a session expiry. Callbacks run on kazoo's
event thread and must not block.

With a `ZkSecurity` (`zk_security.py`) the session logs in with SASL and znodes are created with
Kafka's ACLs (`acl_for(path)`); a login ZooKeeper refuses is a `ZooKeeperUnavailableError` naming the
user and the setting, at start.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, NodeExistsError
from kazoo.security import ACL
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from broker.cluster import zk_layout
from broker.cluster.zk_security import ZkSecurity

log = logging.getLogger(__name__)


class ZooKeeperUnavailableError(RuntimeError):
    """No ZooKeeper session could be opened; names the connect string."""


class ZkClient:
    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, security: ZkSecurity | None = None) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.security = security or ZkSecurity()
        self.kazoo = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0,
                                 connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
                                 sasl_options=self.security.sasl_options(), default_acl=self.security.default_acl())
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._lost_callbacks: list[Callable[[], None]] = []
        self._stopping = False
        self._session_id: int | None = None
        self._lock = threading.Lock()
        self.kazoo.add_listener(self._on_state)

    def start(self) -> None:
        try:
            self.kazoo.start(timeout=self.connection_timeout_ms / 1000.0)
            self._session_id = self.session_id
            for path in zk_layout.TOP_LEVEL_PATHS:
                try:
                    self.kazoo.ensure_path(path, acl=self.acl_for(path))
                except NodeExistsError:
                    pass
        except KazooTimeoutError:
            self.kazoo.stop()
            raise ZooKeeperUnavailableError(
                f"no ZooKeeper session with {self.connect} within {self.connection_timeout_ms} ms "
                "(zookeeper.connect, zookeeper.connection.timeout.ms)") from None
        except AuthFailedError:
            self.stop()
            raise ZooKeeperUnavailableError(
                f"ZooKeeper at {self.connect} refused the SASL login of user {self.security.username!r}: check "
                "zookeeper.sasl.jaas.config against ZooKeeper's JAAS Server section") from None

    def acl_for(self, path: str) -> list[ACL] | None:
        """The ACL a znode at `path` is created with (None: kazoo's default, open without zookeeper.set.acl)."""
        return self.security.acl_for(path)

    def stop(self) -> None:
        self._stopping = True
        self.kazoo.stop()
        self.kazoo.close()

    @property
    def session_id(self) -> int:
        return int(self.kazoo.client_id[0]) if self.kazoo.client_id else 0

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Run `callback` (on a worker) whenever a session replaces an expired one."""
        self._new_session_callbacks.append(callback)

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the session has expired: every ephemeral node of this broker is gone."""
        self._lost_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            if not self._stopping:      # else our own close, not an expiry
                log.warning("ZooKeeper session with %s expired", self.connect)
            for cb in self._lost_callbacks:
                self.kazoo.handler.spawn(cb)
        elif state == KazooState.CONNECTED:
            # the listener runs before client_id is updated; look at the session on a worker
            self.kazoo.handler.spawn(self._check_new_session)

    def _check_new_session(self) -> None:
        with self._lock:
            current = self.session_id
            if self._session_id is None or current == self._session_id or current == 0:
                return
            self._session_id = current
        log.info("new ZooKeeper session %#x with %s", current, self.connect)
        for cb in self._new_session_callbacks:
            cb()
