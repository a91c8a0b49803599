"""Every example in docs/SECURITY.md runs, in order, as an operator would copy it: openssl makes the certificates,
the properties blocks are saved where their first line says, the servers start (`pylog broker`, and the cluster's
ZooKeeper with `java`; each waited for on its ports, stopped with SIGTERM at the end), the tools log in over
SASL_SSL, and the Spark block runs in the suite's Spark session with `spark` defined.

The only changes: each port of the page (2181, 9xxx) becomes a free port, /tmp/pylog-secure a folder of the test."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pylog.launch.process import free_port, wait_for_port
from tests.support.markdown_examples import Block, commands, readme, substitute

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "SECURITY.md"

pytestmark = pytest.mark.timeout(300)


_PORT = re.compile(r"(?<=[:=])(2181|9\d{3})\b")
_SERVERS = ("pylog broker", "java ")


class Reader:
    def __init__(self, tmp: Path, spark: object) -> None:
        self.spark = spark
        self.ports = {int(p): free_port() for p in _PORT.findall(PAGE.read_text())}
        self.names = {"/tmp/pylog-secure": str(tmp / "pylog-secure")}
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "PYSPARK_PYTHON": sys.executable}
        self.servers: list[subprocess.Popen] = []
        self.outputs: list[tuple[str, str]] = []

    def port(self, page_port: int) -> int:
        return self.ports[page_port]

    def run(self, block: Block) -> None:
        code = _PORT.sub(lambda m: str(self.ports[int(m.group(1))]), substitute(block.code, self.names))
        if block.lang == "properties":
            first, _, body = code.partition("\n")
            assert first.startswith("# /"), f"{block.where('docs/SECURITY.md')}: a properties block names its file"
            Path(first[2:].strip()).write_text(body)
        elif block.lang == "python":
            import contextlib
            import io
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(code, block.where("docs/SECURITY.md"), "exec"), {"spark": self.spark})  # noqa: S102
            self.outputs.append(("python", printed.getvalue()))
        else:
            assert block.lang == "bash", block
            for command in commands(code):
                self.shell(command, block)

    def shell(self, command: str, block: Block) -> None:
        if command.startswith(_SERVERS):       # a server, started in its own terminal: wait for its ports
            server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=REPO, env=self.env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.servers.append(server)
            config = Path(command.split()[-1] if command.startswith("java") else command.split("--config ")[1].split()[0])
            for port in re.findall(r"(?:clientPort=|:)(\d+)(?=[,\n]|$)", re.search(
                    r"^(?:listeners|clientPort)=.*$", config.read_text(), re.M).group(0)):
                try:
                    wait_for_port(int(port), 60, server)
                except RuntimeError as e:     # what the server said before it exited
                    err = server.stderr.read() if server.stderr and server.poll() is not None else ""
                    raise AssertionError(f"{block.where('docs/SECURITY.md')}: `{command}`: {e}\n{err[-3000:]}") \
                        from None
            return
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{block.where('docs/SECURITY.md')}: `{command}`:\n{done.stderr[-2500:]}"
        self.outputs.append((command, done.stdout))


def test_every_security_doc_example_runs_as_written(spark: object, tmp_path: Path) -> None:
    reader = Reader(tmp_path, spark)
    examples = readme(PAGE)
    assert {b.lang for b in examples} == {"bash", "properties", "python"}
    try:
        for block in examples:
            reader.run(block)
        assert reader.servers and all(s.poll() is None for s in reader.servers)
        outputs = dict(reader.outputs)
        (users,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog users list")]
        assert users.split() == ["alice", "SCRAM-SHA-512", "iterations=8192"]
        (acls,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog acls list")]
        assert "name=payments, patternType=LITERAL" in acls and "name=payments-, patternType=PREFIXED" in acls
        # the page's claim: a topic alice was not granted is refused, and not listed to her
        client = ["--bootstrap-server", f"localhost:{reader.port(9093)}", "--command-config",
                  str(tmp_path / "pylog-secure" / "client.properties")]
        refused = subprocess.run([sys.executable, "-m", "pylog", "topics", "create", "--topic", "ledger", *client],
                                 cwd=REPO, env=reader.env, capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
        listed = subprocess.run([sys.executable, "-m", "pylog", "topics", "list", *client], cwd=REPO, env=reader.env,
                                capture_output=True, text=True, timeout=60)
        assert "payments" in listed.stdout and "__consumer_offsets" not in listed.stdout, listed.stdout
        (consumed,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog consume")]
        assert consumed.strip() == '{"id": 1}'
        assert outputs["python"].strip() == "1"
        # the page's claim: the SASL_SSL listener on every interface started (it is authenticated), and the
        # broker's data directory holds alice's credential, salted, never her password
        stored = (tmp_path / "pylog-secure" / "data" / "scram-credentials.json").read_text()
        assert "alice" in stored and "alice-secret" not in stored
        # the cluster: alice's topic is on both brokers, replicated over INTERNAL; ZooKeeper lets anyone read
        # the cluster's znodes but change none, and keeps alice's credential from all but the brokers' user
        (described,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog topics describe")]
        assert described.count("Isr: 1,2") + described.count("Isr: 2,1") == 2, described
        _check_zookeeper(reader.port(2181))
    finally:
        for server in reversed(reader.servers):       # the cluster's brokers, then its ZooKeeper, then the first
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            server.wait(30)
        assert reader.servers[0].returncode == 0, "the first broker stops cleanly"


def _check_zookeeper(port: int) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    anonymous = KazooClient(hosts=f"127.0.0.1:{port}/pylog")
    anonymous.start(timeout=10)
    try:
        assert anonymous.get("/brokers/topics/payments-eu")[0]
        with pytest.raises(NoAuthError):
            anonymous.set("/brokers/topics/payments-eu", b"{}")
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/alice")
    finally:
        anonymous.stop()
