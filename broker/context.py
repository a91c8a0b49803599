"""The services an API handler may use, gathered in one object passed to every handler.

Owns nothing itself: handlers stay free of state by reaching broker state only through this.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from broker.cluster.producer_ids import ProducerIdManager
from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager


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

    def now_ms(self) -> int:
        return int(self.clock() * 1000)
