"""A host of its own for one broker: a Linux network namespace joined to the test's namespace by a veth
pair, so a test can cut a broker off the network (and heal it) instead of killing or freezing it.

The test's side of the pair holds `outer_ip`, the namespace's side `inner_ip`; everything the isolated
broker must reach (ZooKeeper, the other brokers) listens on `outer_ip`, which the test's own clients
reach as a local address. `cut()` takes the link down: packets in either direction are dropped and open
TCP connections stall, as on a failed switch port; nothing is reset. `heal()` brings it back.
Needs CAP_NET_ADMIN: run as root, or with password-less sudo (the same rule as the Makefile's apt step).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Sequence

from pylog.launch.process import BrokerProcess

_SUDO: list[str] = [] if os.geteuid() == 0 else ["sudo", "-n"]


def _ip(*args: str) -> None:
    done = subprocess.run([*_SUDO, "ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()} "
                           "(network namespaces need root or password-less sudo)")


def _remove_leftovers() -> None:
    """Namespaces and veth pairs of test processes that died before closing theirs (a leftover pair
    would hold the same subnet as a new one whose pid maps to it)."""
    listed = subprocess.run([*_SUDO, "ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run([*_SUDO, "ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for name in listed:
        if name.startswith("pylog-test-") and not Path(f"/proc/{name.removeprefix('pylog-test-')}").exists():
            subprocess.run([*_SUDO, "ip", "netns", "del", name], capture_output=True)
    for link in re.findall(r"^\d+: (plg(\d+)o)[@:]", links, re.M):
        if not Path(f"/proc/{link[1]}").exists():
            subprocess.run([*_SUDO, "ip", "link", "del", link[0]], capture_output=True)


class NetworkNamespace:
    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"pylog-test-{pid}"
        self._outer, self._inner = f"plg{pid % 10**8}o", f"plg{pid % 10**8}i"   # at most 15 characters
        subnet = f"10.213.{pid % 250 + 1}"
        self.outer_ip, self.inner_ip = f"{subnet}.1", f"{subnet}.2"
        self._created = False

    def create(self) -> "NetworkNamespace":
        _remove_leftovers()
        _ip("netns", "add", self.name)
        self._created = True
        _ip("link", "add", self._outer, "type", "veth", "peer", "name", self._inner)
        _ip("link", "set", self._inner, "netns", self.name)
        _ip("addr", "add", f"{self.outer_ip}/24", "dev", self._outer)
        _ip("link", "set", self._outer, "up")
        _ip("-n", self.name, "addr", "add", f"{self.inner_ip}/24", "dev", self._inner)
        _ip("-n", self.name, "link", "set", self._inner, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        return self

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (`ip netns exec` execs it: the process keeps its pid)."""
        return [*_SUDO, "ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        _ip("link", "set", self._outer, "down")

    def heal(self) -> None:
        _ip("link", "set", self._outer, "up")

    def close(self) -> None:
        if self._created:
            subprocess.run([*_SUDO, "ip", "link", "del", self._outer], capture_output=True)
            subprocess.run([*_SUDO, "ip", "netns", "del", self.name], capture_output=True)
            self._created = False


class NamespacedBroker(BrokerProcess):
    """A `pylog broker` listening on the namespace's address, from inside the namespace."""

    def __init__(self, netns: NetworkNamespace, data_dir: Path, settings: dict[str, object]) -> None:
        super().__init__(data_dir, settings=settings, host=netns.inner_ip)
        self.netns = netns

    def command(self) -> list[str]:
        return self.netns.command(super().command())
