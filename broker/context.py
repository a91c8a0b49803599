"""The services an API handler may use, gathered in one object passed to every handler.

Owns nothing itself: handlers stay free of state by reaching broker state only through this.
"""
from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from broker.cluster.producer_ids import ProducerIdManager
from broker.config import BrokerConfig
from broker.fetch_sessions import FetchSessionCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from kafka_protocol.security.acls import AclOperation, ResourceType
from kafka_protocol.security.principal import ANONYMOUS_USER, KafkaPrincipal

if TYPE_CHECKING:
    from broker.tiered.remote_log_manager import RemoteLogManager
    from broker.security.authorizer import AclAuthorizer
    from broker.groups.service import GroupService
    from broker.security.authenticator import Authenticator
    from broker.security.credentials import CredentialStore
    from broker.transactions.coordinator import TransactionCoordinator

# The connection's client address ("/127.0.0.1"), set by the server per connection task (JoinGroup's client host).
CLIENT_HOST: ContextVar[str] = ContextVar("client_host", default="")


@dataclass
class Session:
    """Who sent the request and on which listener (Kafka's RequestContext): set per connection."""

    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS_USER
    client_host: str = ""
    advertised_host: str = ""
    advertised_port: int = 0
    authenticator: "Authenticator | None" = None
    close_after_response: bool = False      # a failed login: answer, then close the connection


# The session of the connection whose request is running (set by the connection around each handler).
SESSION: ContextVar[Session | None] = ContextVar("session", default=None)


def _who() -> tuple[KafkaPrincipal, str]:
    """The running request's principal and client address (a request with no session is the broker's own)."""
    session = SESSION.get()
    if session is None:
        return ANONYMOUS_USER, ""
    return session.principal, session.client_host.lstrip("/")


@dataclass
class BrokerContext:
    config: BrokerConfig
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    cluster_id: str
    node_id: int
    host: str
    port: int
    clock: Callable[[], float] = field(default=time.time)
    groups: "GroupService | None" = None
    transactions: "TransactionCoordinator | None" = None
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    credentials: "CredentialStore | None" = None
    reload_tls: Callable[[], None] | None = None     # load the TLS listeners' changed keys and trust (KIP-226)
    authorizer: "AclAuthorizer | None" = None         # authorizer.class.name; None: everything is allowed
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)   # served when metrics.port is set
    remote: "RemoteLogManager | None" = None          # tiered storage (remote.log.storage.system.enable)

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str,
                   log_if_denied: bool = True) -> bool:
        """May the principal of the running request perform `operation` on the resource (always, without ACLs)?"""
        if self.authorizer is None:
            return True
        principal, host = _who()
        return self.authorizer.authorize(principal, host, operation, resource_type, name, log_if_denied)

    def authorized_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May it perform `operation` on some resource of the type (Kafka's authorizeByResourceType)?"""
        if self.authorizer is None:
            return True
        principal, host = _who()
        return self.authorizer.authorize_any(principal, host, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field for the running request's principal."""
        from kafka_protocol.security.acls import SUPPORTED_OPERATIONS
        if self.authorizer is None:
            return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
        principal, host = _who()
        return self.authorizer.authorized_operations(principal, host, resource_type, name)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def address(self) -> tuple[str, int]:
        """This broker's address as the client should use it: the advertised one of its listener."""
        session = SESSION.get()
        if session is not None and session.advertised_port:
            return session.advertised_host, session.advertised_port
        return self.host, self.port
