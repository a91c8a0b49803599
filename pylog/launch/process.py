"""Run a Kafka-protocol server as a child process on a loopback port: what `make demo` starts its broker with.

`BrokerProcess` runs `pylog broker` and keeps its data directory and port across
`stop()`/`kill()`/`start()`, so callers can restart the same broker cleanly or after SIGKILL.
`ServerProcess` is the launcher (start, ready when the port accepts connections, stop, kill, log);
`free_port` and `wait_for_port` are its loopback helpers. `ConsoleProcess` runs `pylog console` (the console's
tests and benchmark). The product uses it only for the demo
(pylog/demo.py); tests and benchmarks reuse it. Launchers of the other brokers they compare against
(Tansu, Apache Kafka) are their own (tests/support, bench/_common.py). The broker never imports this.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None, host: str = HOST) -> None:
    """Return once `port` accepts connections, and, with `proc`, once it is `proc` (or a child of it) that listens
    there: a free port can be taken by another server between `free_port()` and `proc`'s bind, and connecting to
    that one would pass for `proc` ready while `proc` fails to bind (RuntimeError when it exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                if proc is None or listens(proc.pid, port) is not False:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def _in_use(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool | None:
    """Whether process `pid` or one of its descendants holds a listening TCP socket on `port` (Linux's /proc);
    None where that cannot be told: /proc unreadable, or no listener on `port` in this network namespace (the
    server may listen in another one, as the network-cut tests' brokers do)."""
    try:
        inodes = _listening_inodes(port)
        if not inodes:
            return None
        family = _descendants(pid)
        for p in family:
            for fd in os.scandir(f"/proc/{p}/fd"):
                try:
                    link = os.readlink(fd.path)
                except OSError:
                    continue
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return True
        return False
    except OSError:
        return None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:      # 0A: LISTEN
                inodes.add(fields[9])
    return inodes


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    family, todo = [], [pid]
    while todo:
        p = todo.pop()
        family.append(p)
        todo.extend(children.get(p, ()))
    return family


class ServerProcess:
    """A server started from `command()`, ready when its port accepts connections on `host`
    (loopback unless given: a test may put a broker on another interface or in a network namespace)."""

    name = "server"

    def __init__(self, workdir: Path, port: int | None = None, host: str = HOST) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port or free_port()
        self._port_chosen = port is None        # ours to change while it has never started
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir.parent / f"{self.name}-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        """Start and wait until it listens. A port this object chose itself and another process took meanwhile
        (the server exits, unable to bind) is chosen again, twice at most, before its first successful start."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in (1, 2, 3):
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            try:
                wait_for_port(self.port, timeout, self.proc, self.host)
                self._port_chosen = False
                return self
            except (RuntimeError, TimeoutError) as e:
                self.kill()
                taken = self._port_chosen and attempt < 3 and _in_use(self.host, self.port)   # by another
                if not taken:
                    raise RuntimeError(f"{e}; last output:\n{self.log_text()[-2000:]}") from None
                self.port = free_port()
                self.log_path = self.workdir.parent / f"{self.name}-{self.port}.log"
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code (SIGKILL after `timeout`)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        """SIGKILL: no flush, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        try:
            self.stop()
        except Exception:  # noqa: BLE001
            self.kill()


class BrokerProcess(ServerProcess):
    name = "pylog-broker"

    def __init__(self, data_dir: Path, port: int | None = None, settings: dict[str, object] | None = None,
                 host: str = HOST) -> None:
        super().__init__(data_dir, port, host)
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "pylog", "broker", "--data-dir", str(self.data_dir), "--port", str(self.port),
               "--host", self.host]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        return cmd


class ConsoleProcess(ServerProcess):
    """`pylog console` against `bootstrap` (the console's own flags in `extra`), ready when its port listens;
    `url(path)` is a page's address."""

    name = "pylog-console"

    def __init__(self, workdir: Path, bootstrap: str, extra: list[str] | None = None, port: int | None = None,
                 host: str = HOST) -> None:
        super().__init__(workdir, port, "127.0.0.1" if host == "0.0.0.0" else host)
        self.bind = host
        self.bootstrap_server = bootstrap
        self.extra = list(extra or [])

    def command(self) -> list[str]:
        return [sys.executable, "-m", "pylog", "console", "--bootstrap-server", self.bootstrap_server,
                "--host", self.bind, "--port", str(self.port), *self.extra]

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"
