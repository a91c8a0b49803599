"""docs/OBJECT_STORAGE.md runs as a reader would copy it: its own MinIO (`pylog objectstore up`), a broker with
tiered storage, a topic most of whose segments end up only in the bucket, read back from offset 0, then a
batch load of it into a Delta table in the bucket.

The blocks are read from the Markdown (tests/support/markdown_examples.py). The two servers the page starts "in
a terminal of its own" run in the background until the page ends; `export` lines set the environment of the
commands after them. The only changes: the ports (9000, 9092) become free ones and /tmp/pylog-tiered a folder
of the test's. The test's own environment carries no AWS variable: the page's exports are what reach the store.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.table_location import ENV_KEYS, TableLocation
from pylog.launch.object_store import wait_for_build
from pylog.launch.process import free_port, wait_for_port
from tests.support.markdown_examples import commands, readme, substitute

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "OBJECT_STORAGE.md"

pytestmark = [pytest.mark.object_store, pytest.mark.timeout(900)]

SERVERS = ("pylog objectstore up", "pylog broker ")


def test_the_object_storage_page_runs_as_written(tmp_path):
    wait_for_build()          # make test builds MinIO in the background; `make minio` on the page is then a no-op
    minio_port, broker_port = free_port(), free_port()
    names = {"127.0.0.1:9000": f"127.0.0.1:{minio_port}", "--port 9000": f"--port {minio_port}",
             "localhost:9092": f"127.0.0.1:{broker_port}", "--port 9092": f"--port {broker_port}",
             "/tmp/pylog-tiered": str(tmp_path / "tiered")}
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    servers: list[subprocess.Popen] = []
    outputs: dict[str, str] = {}
    try:
        for block in readme(PAGE):
            if block.lang != "bash":
                continue
            for command in commands(block.code):
                command = substitute(command, names)
                if command.startswith("export "):
                    env.update(dict(item.split("=", 1) for item in shlex.split(command)[1:]))
                elif command.startswith(SERVERS):
                    log = open(tmp_path / f"server-{len(servers)}.log", "wb")
                    servers.append(subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=REPO, env=env, stdout=log,
                                                    stderr=subprocess.STDOUT, start_new_session=True))
                    port = minio_port if "objectstore" in command else broker_port
                    wait_for_port(port, 60, servers[-1])
                else:
                    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO, env=env,
                                          capture_output=True, text=True, timeout=300)
                    assert proc.returncode == 0, (f"{block.where('docs/OBJECT_STORAGE.md')}: `{command}` exited "
                                                  f"{proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
                    outputs[re.sub(r" --.*", "", command)] = proc.stdout
        segments = outputs[f"ls {tmp_path / 'tiered'}/clicks-0/*.log"].split()
        # local.retention.bytes (2 MiB) and at most one segment more: how many files that is depends on how full
        # the producer's batches left each segment (on a busy machine, bigger batches roll them earlier); a
        # segment listed may have gone since (its upload done, local retention deleted it): it holds nothing
        assert segments and sum(_size(s) for s in segments) <= 3 * 2**20, segments
        assert min(int(Path(s).stem) for s in segments) > 50_000, "most of the topic is only in the bucket"
        assert re.search(r"\b100000 records\b", outputs["pylog perf consume"]), outputs["pylog perf consume"]
        status = outputs["pylog job status batch_load"]
        assert "committed" in status and "100000" in status, status
        table = TableLocation.of("s3://lake/tables/clicks", {k.lower(): v for k, v in env.items() if k in ENV_KEYS})
        assert table.delta().to_pyarrow_dataset().count_rows() == 100_000
    finally:
        for proc in reversed(servers):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except FileNotFoundError:
        return 0
