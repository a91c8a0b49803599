"""A local, single-node ZooKeeper for development clusters and tests (the Debian `zookeeper` package).

Owns the lifecycle of one ZooKeeper process: writes its `zoo.cfg` (one address, loopback by default, no admin
server, four-letter words limited to the harmless ones), starts it with the JRE the Makefile
installs, waits until a client session works (ZooKeeper answers `ruok` before it serves, so only a
real session proves readiness), and stops it. Used by `pylog cluster up` and by the cluster tests;
a production cluster points `zookeeper.connect` at its own ensemble instead. With `sasl_users` it also
accepts SASL DIGEST-MD5 logins of those users (the JAAS `Server` section ZooKeeper's docs give), what
brokers with `zookeeper.set.acl=true` log in with; clients without a login may still connect.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper did not start; the message names the command, the port and the end of its log."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalZooKeeper:
    def __init__(self, data_dir: Path, port: int | None = None, tick_ms: int = 500, host: str = "127.0.0.1",
                 sasl_users: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.sasl_users = dict(sasl_users or {})
        self.host = host                 # the one address it listens on
        self.port = port or _free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def start(self, timeout_s: float = 30.0) -> str:
        """Start ZooKeeper and return its connect string once a session can be opened."""
        java = shutil.which("java")
        if java is None or not Path(CLASSPATH.split(":")[0]).exists():
            raise ZooKeeperStartError("ZooKeeper needs java and the Debian zookeeper package (make install provides both)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        # minSessionTimeout lets tests ask for short sessions (2 ticks); Kafka's brokers ask for 18 s
        cfg.write_text(f"tickTime={self.tick_ms}\ndataDir={self.data_dir / 'data'}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\nmaxClientCnxns=0\n"
                       f"minSessionTimeout={2 * self.tick_ms}\n4lw.commands.whitelist=ruok,srvr,stat,mntr,envi\n")
        jvm = ["-Xmx256m", "-XX:+UseSerialGC"]
        if self.sasl_users:
            jaas = self.data_dir / "zookeeper_jaas.conf"
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            jaas.write_text(f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n")
            jaas.chmod(0o600)
            with open(cfg, "a") as f:
                f.write("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n")
            jvm.append(f"-Djava.security.auth.login.config={jaas}")
        cmd = [java, *jvm, "-cp", CLASSPATH, MAIN, str(cfg)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        from kazoo.client import KazooClient
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            client = KazooClient(hosts=self.connect, timeout=1.0, connection_retry=None)
            try:
                client.start(timeout=1.0)
                client.get_children("/")
                return self.connect
            except Exception:   # noqa: BLE001 (not serving yet: any client error means "try again")
                time.sleep(0.1)
            finally:
                client.stop()
                client.close()
        tail = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        self.stop()
        raise ZooKeeperStartError(f"ZooKeeper did not serve on {self.connect} within {timeout_s:.0f}s "
                                  f"({' '.join(cmd)}); its log ends:\n{tail}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
