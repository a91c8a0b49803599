"""Every example in docs/SECURITY.md runs, in order, as an operator would copy it: openssl makes the certificates,
the properties blocks are saved where their first line says, `pylog broker` starts (and is stopped with SIGTERM),
the tools log in over SASL_SSL, and the Spark block runs in the suite's Spark session with `spark` defined.

The only changes: the ports 9092 and 9093 become free ports, /tmp/pylog-secure a folder of the test."""
from __future__ import annotations

import os
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


class Reader:
    def __init__(self, tmp: Path, spark: object) -> None:
        self.spark = spark
        self.ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
        self.names = {":9092": f":{self.ports['PLAINTEXT']}", ":9093": f":{self.ports['SASL_SSL']}",
                      "/tmp/pylog-secure": str(tmp / "pylog-secure")}
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "PYSPARK_PYTHON": sys.executable}
        self.broker: subprocess.Popen | None = None
        self.outputs: list[tuple[str, str]] = []

    def run(self, block: Block) -> None:
        code = substitute(block.code, self.names)
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
        if command.startswith("pylog broker"):
            self.broker = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=REPO, env=self.env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            wait_for_port(self.ports["SASL_SSL"], 30, self.broker)
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
        assert reader.broker is not None and reader.broker.poll() is None
        outputs = dict(reader.outputs)
        (users,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog users list")]
        assert users.split() == ["alice", "SCRAM-SHA-512", "iterations=8192"]
        (acls,) = [out for cmd, out in reader.outputs if cmd.startswith("pylog acls list")]
        assert "name=payments, patternType=LITERAL" in acls and "name=payments-, patternType=PREFIXED" in acls
        # the page's claim: a topic alice was not granted is refused, and not listed to her
        client = ["--bootstrap-server", f"localhost:{reader.ports['SASL_SSL']}", "--command-config",
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
    finally:
        if reader.broker is not None and reader.broker.poll() is None:
            reader.broker.send_signal(signal.SIGTERM)
            assert reader.broker.wait(30) == 0
