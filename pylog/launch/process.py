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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


class ServerProcess:
    """A server started from `command()`, ready when its port accepts connections on `host`
    (loopback unless given: a test may put a broker on another interface or in a network namespace)."""

    name = "server"

    def __init__(self, workdir: Path, port: int | None = None, host: str = HOST) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir.parent / f"{self.name}-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        try:
            wait_for_port(self.port, timeout, self.proc, self.host)
        except (RuntimeError, TimeoutError) as e:
            self.kill()
            raise RuntimeError(f"{e}; last output:\n{self.log_text()[-2000:]}") from None
        return self

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
