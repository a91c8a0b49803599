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
from broker.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from broker.groups.service import GroupService
    from broker.transactions.coordinator import TransactionCoordinator

# The connection's client address ("/127.0.0.1"), set by the server per connection task (JoinGroup's client host).
CLIENT_HOST: ContextVar[str] = ContextVar("client_host", default="")


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

    def now_ms(self) -> int:
        return int(self.clock() * 1000)
