"""Every example in docs/CLI.md runs, in order, as a reader would copy it (README.md's run in
tests/e2e/test_readme_examples.py).

The blocks are read from the Markdown itself (tests/support/markdown_examples.py: a block with a language
tag is an example, one without is output). The broker is a real `pylog broker` process, and the state is
exactly what the page says its commands assume: topic `orders` (one partition) with seven records written
without a transaction at offsets 0-6, the first record of transaction `payments-1` at offset 7, left open
by a librdkafka transactional producer that stays alive for the whole test, one more plain record at
offset 8, and group `billing` with offset 3 committed. The only change to a command is `localhost:9092`,
which becomes the test broker's address. No Spark.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pylog.launch.process import BrokerProcess
from tests.support.clients import create_topic, produce
from tests.support.markdown_examples import Block, commands, readme, substitute

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "CLI.md"
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


def test_no_other_page_of_docs_has_examples_that_nothing_runs() -> None:
    """The project's rule: every example runs. docs/CLI.md (here), docs/METRICS.md
    (tests/integration/test_metrics.py) and docs/SECURITY.md (tests/e2e/test_docs_security.py) are the pages
    of docs/ with runnable blocks (a language tag); a new one needs its runner. Output samples have no
    language tag."""
    with_examples = sorted(p.name for p in (REPO / "docs").glob("*.md") if readme(p))
    assert with_examples == ["CLI.md", "METRICS.md", "SECURITY.md"], f"docs pages with runnable blocks: {with_examples}"
