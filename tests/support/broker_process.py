"""Tests start brokers with the product's own launcher (broker.process)."""
from broker.process import BrokerProcess, free_port, wait_for_port

__all__ = ["BrokerProcess", "free_port", "wait_for_port"]
