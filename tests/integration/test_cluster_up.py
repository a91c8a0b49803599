"""`pylog cluster up` as a user runs it: fixed ports, a readable banner, one line when a port is taken,
and Ctrl-C stops everything and removes a temporary data directory (a given --data-dir is kept and
brings the cluster's topics back)."""
from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pylog.launch.process import free_port
from tests.support.clients import create_topic

pytestmark = [pytest.mark.timeout(240)]


def _up(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "cluster", "up", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    banner = ""
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while "Ctrl-C stops the cluster." not in banner:
        line = proc.stdout.readline()
        assert line and time.monotonic() < deadline, f"cluster up ended or hung:\n{banner}{proc.stdout.read()}"
        banner += line
    return proc, banner


def _ctrl_c(proc: subprocess.Popen) -> str:
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    return out


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_run_of_ports() -> tuple[int, int]:
    """Three consecutive ports for the brokers and one for ZooKeeper, below the kernel's ephemeral range: the
    suite's own client sockets take ephemeral ports all the time, so a run picked there (port + 1, port + 2)
    was often taken by an outgoing connection by the time the cluster bound it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    while True:
        port = rng.randrange(max(low - 12000, 10000), low - 4)
        zk_port = port + 3
        if all(_bindable(p) for p in (port, port + 1, port + 2, zk_port)):
            return port, zk_port


def test_cluster_up_on_fixed_ports_then_ctrl_c_cleans_up(tmp_path):
    port, zk_port = _free_run_of_ports()
    try:
        proc, banner = _up("--brokers", "3", "--port", str(port), "--zookeeper-port", str(zk_port))
    except AssertionError as e:     # another process of the suite took one of the ports since they were free
        assert "is in use" in str(e), e
        port, zk_port = _free_run_of_ports()
        proc, banner = _up("--brokers", "3", "--port", str(port), "--zookeeper-port", str(zk_port))
    try:
        assert f"bootstrap servers: 127.0.0.1:{port},127.0.0.1:{port + 1},127.0.0.1:{port + 2}" in banner, banner
        assert f"ZooKeeper: 127.0.0.1:{zk_port}/pylog" in banner
        assert re.search(r"controller: broker [012] \(epoch \d+\)", banner), banner
        data = Path(re.search(r"data: (\S+) \(removed when the cluster stops", banner).group(1))
        assert data.is_dir()
        # a second cluster on the same ports: one line naming the port and the fix
        second = subprocess.run([sys.executable, "-m", "pylog", "cluster", "up", "--port", str(port),
                                 "--zookeeper-port", str(free_port())], capture_output=True, text=True, timeout=60)
        lines = (second.stdout + second.stderr).strip().splitlines()
        assert second.returncode == 1 and len(lines) == 1, lines
        assert f"port {port} (broker 0) is in use" in lines[0] and "--port" in lines[0], lines
    finally:
        out = _ctrl_c(proc)
    assert "cluster stopped" in out and "Traceback" not in out, out
    assert not data.exists(), "the temporary data directory is removed"
    assert not any(_listening(p) for p in (port, port + 1, port + 2, zk_port))


def test_cluster_up_with_a_data_dir_keeps_its_topics_across_runs(tmp_path):
    port, zk_port = free_port(), free_port()
    args = ("--brokers", "1", "--port", str(port), "--zookeeper-port", str(zk_port), "--data-dir", str(tmp_path))
    proc, banner = _up(*args)
    try:
        create_topic(f"127.0.0.1:{port}", "kept", partitions=2)
    finally:
        out = _ctrl_c(proc)
    assert f"its data is in {tmp_path}" in out
    proc, banner = _up(*args)
    try:
        status = subprocess.run([sys.executable, "-m", "pylog", "cluster", "status", "--zookeeper",
                                 f"127.0.0.1:{zk_port}/pylog"], capture_output=True, text=True, timeout=60)
        assert "topic kept" in status.stdout and "kept-1: leader 0" in status.stdout, status.stdout + status.stderr
    finally:
        _ctrl_c(proc)
