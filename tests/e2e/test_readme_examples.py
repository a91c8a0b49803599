"""Every example in README.md runs, in order, as a reader would copy it (docs/CLI.md's run in
tests/integration/test_docs_examples.py, against the state that page states, without Spark).

The blocks are read from the Markdown itself (tests/support/markdown_examples.py), so an example cannot
rot without failing this test. The only changes are where things are: `localhost:9092` is the test's
broker, `/tmp/pylog...` and `/data/...` are folders of the test, a `pylog broker` line gets a free port
and is started, checked ready and stopped with SIGTERM (exit 0), and a `pylog job` line reads the
shipped conf/jobs file with those same substitutions. `make demo` and `make test` are what CI and
tests/e2e/test_demo.py run. Python blocks run in the suite's Spark session with `spark` defined.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.jobs import JOB_JVM_OPTS, REPO
from tests.support.markdown_examples import Block, commands, readme, substitute
from pylog.launch.process import free_port, wait_for_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUN_ELSEWHERE = {"make demo": "tests/e2e/test_demo.py", "make test": "CI (.ci/run)"}
_JOB = re.compile(r"^pylog job (?:status )?(\w+)")   # a job, or the job whose runs `status` shows


class Reader:
    """Runs the README's blocks in order, pointed at `bootstrap` and folders under `tmp`."""

    def __init__(self, bootstrap: str, tmp: Path, spark: object) -> None:
        self.tmp, self.spark = tmp, spark
        self.names = {"localhost:9092": bootstrap, "/tmp/pylog-data": str(tmp / "pylog-data"),
                      "/tmp/pylog/": f"{tmp}/pylog/", "/data/": f"{tmp}/data/"}
        # the jobs' JVMs as tests/support/jobs.run_job starts them (C1 only, serial GC: a third less CPU for a
        # few thousand records; same Java semantics); `make demo`'s test keeps the JVM's defaults
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "SPARK_SUBMIT_OPTS": " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), JOB_JVM_OPTS])),
                    "PYSPARK_PYTHON": sys.executable}
        self.ran: list[str] = []
        self.python_globals: dict[str, object] = {"spark": spark}

    def run(self, block: Block) -> None:
        if block.lang == "python":
            code = substitute(block.code, self.names)
            exec(compile(code, block.where("README.md"), "exec"), self.python_globals)   # noqa: S102
            self.ran.append(block.where("README.md"))
            return
        assert block.lang == "bash", block
        for command in commands(block.code):
            if command in RUN_ELSEWHERE:
                continue
            self.shell(command, block)

    def shell(self, command: str, block: Block) -> None:
        cmd = substitute(command, self.names)
        if cmd.startswith("pylog broker"):
            self.broker(cmd, block)
            return
        job = _JOB.match(cmd)
        if job:
            cmd = cmd.replace(job.group(0), f"{job.group(0)} --config {self.job_config(job.group(1))}", 1)
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=REPO, env=self.env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, (f"{block.where('README.md')}: `{command}` exited {proc.returncode}:\n"
                                      f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
        self.ran.append(command)

    def job_config(self, name: str) -> Path:
        f = self.tmp / "conf" / f"{name}.properties"
        f.parent.mkdir(exist_ok=True)
        f.write_text(substitute((REPO / "conf" / "jobs" / f"{name}.properties").read_text(), self.names))
        return f

    def broker(self, command: str, block: Block) -> None:
        for attempt in (1, 2, 3):
            port = free_port()
            cmd = re.sub(r"--port \d+", f"--port {port}", command) if "--port" in command else f"{command} --port {port}"
            proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                wait_for_port(port, 30, proc)       # held by this broker, not by another test's server
                break
            except RuntimeError:
                out = proc.communicate()[0]
                # another test's server took the free port first: choose again
                assert "already in use" in out and attempt < 3, f"{block.where('README.md')}: `{cmd}` exited: {out[-2000:]}"
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"{block.where('README.md')}: `{cmd}` never got ready") from None
        try:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, f"`{cmd}`: SIGTERM ended it with {proc.returncode}: {out[-2000:]}"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        self.ran.append(cmd)


def test_every_readme_example_runs_as_written(spark, pylog_broker, tmp_path):
    reader = Reader(pylog_broker.bootstrap, tmp_path, spark)
    examples = readme(REPO / "README.md")
    for block in examples:
        reader.run(block)
    shell_commands = sum(len([c for c in commands(b.code) if c not in RUN_ELSEWHERE]) for b in examples
                         if b.lang == "bash")
    python_blocks = sum(1 for b in examples if b.lang == "python")
    assert len(reader.ran) == shell_commands + python_blocks
    assert python_blocks >= 2 and shell_commands >= 20
