"""Every example in docs/CLI.md and docs/CONSOLE.md runs, in order, as a reader would copy it (README.md's run
in tests/e2e/test_readme_examples.py).

The blocks are read from the Markdown itself (tests/support/markdown_examples.py: a block with a language
tag is an example, one without is output). The broker is a real `pylog broker` process, and the state is
exactly what the page says its commands assume: topic `orders` (one partition) with seven records written
without a transaction at offsets 0-6, the first record of transaction `payments-1` at offset 7, left open
by a librdkafka transactional producer that stays alive for the whole test, one more plain record at
offset 8, and group `billing` with offset 3 committed. The only change to a command is `localhost:9092`,
which becomes the test broker's address. No Spark.

docs/CONSOLE.md makes its own topic and group; each `pylog console` it starts is a server run in its own
terminal: started in the background, waited for on its port, kept until the page's end, then stopped with
SIGTERM (exit 0). Its ports (8080-8089) become free ones, /tmp/pylog-console.token a file of the test.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pylog.launch.process import BrokerProcess, free_port, wait_for_port
from tests.support.clients import create_topic, produce
from tests.support.markdown_examples import Block, commands, readme, substitute

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "CLI.md"
CONSOLE_PAGE = REPO / "docs" / "CONSOLE.md"
TIMEOUT_S = 60

pytestmark = pytest.mark.timeout(300)

BEFORE = [f"order-{i}".encode() for i in range(7)]     # offsets 0-6
OPEN = b"payment-open"                                  # offset 7: payments-1's open transaction
AFTER = b"order-8"                                      # offset 8


class Reader:
    """Runs a page's shell blocks in order, as `bash -o pipefail -c` from the repository, pointed at `bootstrap`."""

    def __init__(self, page: Path, bootstrap: str) -> None:
        self.name = str(page.relative_to(REPO))
        self.names = {"localhost:9092": bootstrap}
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        self.ran: list[tuple[str, str]] = []      # (command as written, its stdout)

    def run(self, block: Block) -> None:
        assert block.lang == "bash", f"{block.where(self.name)}: no runner for ```{block.lang} blocks"
        for command in commands(block.code):
            self.ran.append((command, self.shell(command, block)))

    def shell(self, command: str, block: Block) -> str:
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", substitute(command, self.names)], cwd=REPO,
                              env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, (f"{block.where(self.name)}: `{command}` exited {proc.returncode}:\n"
                                      f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
        return proc.stdout

    def output(self, prefix: str) -> list[str]:
        """The outputs of the commands that start with `prefix`, in order."""
        return [out for command, out in self.ran if command.startswith(prefix)]


def table(out: str) -> list[dict[str, str]]:
    header, *lines = [line for line in out.splitlines() if line.strip()]
    return [dict(zip(header.split(), line.split())) for line in lines]


def page_state(bootstrap: str) -> Producer:
    """What docs/CLI.md says its examples assume; the transactional producer is returned to be kept alive."""
    create_topic(bootstrap, "orders")
    assert produce(bootstrap, "orders", BEFORE, partition=0) == [(0, i) for i in range(7)]
    payments = Producer({"bootstrap.servers": bootstrap, "transactional.id": "payments-1", "linger.ms": 0})
    payments.init_transactions(20)
    payments.begin_transaction()
    payments.produce("orders", OPEN, partition=0)
    assert payments.flush(20) == 0
    assert produce(bootstrap, "orders", [AFTER], partition=0) == [(0, 8)]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})      # get_watermark_offsets: the high watermark
    try:
        c.commit(offsets=[TopicPartition("orders", 0, 3)], asynchronous=False)
        low, high = c.get_watermark_offsets(TopicPartition("orders", 0), timeout=10)
    finally:
        c.close()
    assert (low, high) == (0, 9)
    return payments


def test_every_cli_doc_example_runs_as_written(broker: BrokerProcess) -> None:
    page = PAGE.read_text()
    examples = readme(PAGE)
    payments = page_state(broker.bootstrap)
    reader = Reader(PAGE, broker.bootstrap)
    for block in examples:
        reader.run(block)
    written = [c for b in examples for c in commands(b.code)]
    assert [c for c, _ in reader.ran] == written and len(written) >= 9

    (consumed,) = reader.output("pylog consume")
    assert consumed.encode().splitlines() == BEFORE                  # stops at the LSO, offset 7

    # the page's sample output row is what the command prints
    (described_group,) = reader.output("pylog groups describe")
    sample = re.search(r"^billing\s+orders\s.*$", page, re.M)
    assert sample is not None
    assert [line.split() for line in described_group.splitlines() if line.startswith("billing ")] == \
        [sample.group(0).split()]

    tx = "pylog transactions --bootstrap-server localhost:9092 "
    listed = reader.output(tx + "list")[0]
    (mine,) = [r for r in table(listed) if r["TransactionalId"] == "payments-1"]
    assert mine["TransactionState"] == "Ongoing"
    pid = mine["ProducerId"]
    (described,) = table(reader.output(tx + "describe ")[0])
    assert (described["ProducerId"], described["TransactionState"], described["TopicPartitions"]) == \
        (pid, "Ongoing", "orders-0")
    producers = table(reader.output(tx + "describe-producers")[0])
    starts = {r["ProducerId"]: r["CurrentTransactionStartOffset"] for r in producers}
    assert starts[pid] == "7"
    assert [table(out) for out in reader.output(tx + "find-hanging")] == [[], []]   # not hanging: tracked, young
    (aborted,) = reader.output(tx + "abort")
    assert aborted.startswith(f"Aborted the transaction of producer {pid} (epoch 0") and "offset 7." in aborted

    # "Afterwards the read_committed consume above skips offset 7 and reads offset 8 too."
    (consume,) = [b for b in examples if commands(b.code)[0].startswith("pylog consume")]
    after = reader.shell(commands(consume.code)[0], consume)
    assert after.encode().splitlines() == [*BEFORE, AFTER]

    payments.abort_transaction(20)      # its coordinator still had it Ongoing: it ends now, with its producer


class ConsoleReader(Reader):
    """docs/CONSOLE.md's reader: a `pylog console` command is a server (see the module's docstring)."""

    def __init__(self, page: Path, bootstrap: str, tmp: Path) -> None:
        super().__init__(page, bootstrap)
        self.ports = {port: str(free_port()) for port in sorted(set(re.findall(r"\b(808\d)\b", page.read_text())))}
        self.names.update({"/tmp/pylog-console.token": str(tmp / "console.token"), **self.ports})
        self.servers: list[subprocess.Popen[str]] = []

    def shell(self, command: str, block: Block) -> str:
        if "pylog console" not in command:
            return super().shell(command, block)
        page_port = re.search(r"--port (\d+)", command).group(1)         # type: ignore[union-attr]
        for attempt in (1, 2, 3):
            line = substitute(command, self.names)
            server = subprocess.Popen(["bash", "-c", line.replace("pylog console", "exec pylog console", 1)],
                                      cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                wait_for_port(int(self.ports[page_port]), 30, server)
                self.servers.append(server)
                return ""
            except RuntimeError:
                taken = "already in use" in server.communicate()[1]
                if not taken or attempt == 3:
                    raise
                # another test's server took the free port first: choose again (the later commands follow)
                self.ports[page_port] = self.names[page_port] = str(free_port())
        raise AssertionError("unreachable")

    def url(self, page_port: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[page_port]}{path}"

    def stop(self) -> list[int]:
        for server in self.servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
        return [server.wait(30) for server in self.servers]


def _committed_and_lag(group: str, topic: str, bootstrap: str) -> tuple[int, int]:
    """The group's committed offsets on the topic's three partitions, summed, and its lag: the high watermark minus
    the committed offset of each partition it has committed on (a partition without one has no lag to show, as in
    kafka-consumer-groups)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = [tp for tp in c.committed([TopicPartition(topic, p) for p in range(3)], timeout=15) if tp.offset >= 0]
        lag = sum(c.get_watermark_offsets(tp, timeout=15)[1] - tp.offset for tp in committed)
        return sum(tp.offset for tp in committed), lag
    finally:
        c.close()


def test_every_console_doc_example_runs_as_written(broker: BrokerProcess, tmp_path: Path) -> None:
    examples = readme(CONSOLE_PAGE)
    reader = ConsoleReader(CONSOLE_PAGE, broker.bootstrap, tmp_path)
    try:
        for block in examples:
            reader.run(block)
        assert len(reader.servers) == 4 and all(s.poll() is None for s in reader.servers)
        # the page's claims: the topic with its 100 records, the group's lag (100 - the 40 read) in lag.json
        with urllib.request.urlopen(reader.url("8080", "/topics"), timeout=15) as r:
            topics = r.read().decode()
        row = re.search(r'<tr data-topic="clicks">(.*?)\n', topics)
        assert row and re.findall(r"<td>(\d+)", row.group(1))[:2] == ["3", "100"]        # partitions, messages
        (lag,) = reader.output("curl -s http://127.0.0.1:8080/groups/dashboard/lag.json")
        sample = json.loads(lag)
        committed, lag_now = _committed_and_lag("dashboard", "clicks", reader.names["localhost:9092"])
        assert sample["group"] == "dashboard" and sample["interval_ms"] == 5000, sample
        assert sample["points"][-1][1] == lag_now and committed >= 40, (sample, committed, lag_now)   # the lag now
        shown = re.search(r"^\{\"group\":.*$", CONSOLE_PAGE.read_text(), re.M)
        assert shown and set(json.loads(shown.group(0))) == set(sample)         # the page's sample has its keys
        assert [out.strip() for out in reader.output("curl -s -o")] == ["401"]
        assert [out.strip() for out in reader.output("curl -s -H")] == ["1"]
        with urllib.request.urlopen(reader.url("8082", "/groups/dashboard/reset"), timeout=15) as r:
            assert 'id="reset"' in r.read().decode()
        with urllib.request.urlopen(reader.url("8083", "/jobs"), timeout=15) as r:
            assert 'data-job="stream_to_delta"' in r.read().decode()
    finally:
        codes = reader.stop()
    assert codes == [0, 0, 0, 0], [s.stderr.read() if s.stderr else "" for s in reader.servers]


def test_no_other_page_of_docs_has_examples_that_nothing_runs() -> None:
    """The project's rule: every example runs. docs/CLI.md and docs/CONSOLE.md (here), docs/METRICS.md
    (tests/integration/test_metrics.py), docs/OBJECT_STORAGE.md (tests/e2e/test_docs_object_storage.py) and
    docs/SECURITY.md (tests/e2e/test_docs_security.py) are the pages
    of docs/ with runnable blocks (a language tag); a new one needs its runner. Output samples have no
    language tag."""
    with_examples = sorted(p.name for p in (REPO / "docs").glob("*.md") if readme(p))
    assert with_examples == ["CLI.md", "CONSOLE.md", "METRICS.md", "OBJECT_STORAGE.md", "SECURITY.md"], \
        f"docs pages with runnable blocks: {with_examples}"
