"""Tests start brokers with the product's own launcher (pylog.launch.process)."""
from pylog.launch.process import BrokerProcess, free_port, wait_for_port

__all__ = ["BrokerProcess", "free_port", "wait_for_port"]
