"""`pylog console` in a real browser: Debian's chromium, headless, driven by Selenium through /usr/bin/chromedriver
(Selenium Manager never runs), against a real `pylog broker` and real `pylog console` processes.

Each page is opened as a user would and what it shows is checked against the broker's own state (topic
names, partition counts, watermarks read with confluent-kafka, partition sizes from the broker's segment files,
committed offsets); each page is saved as a screenshot in the artifacts directory ($PYLOG_TEST_ARTIFACTS, else
.cache/test-artifacts/console/). One browser and one broker for the module; two consoles: a loopback one with
--allow-offset-reset, --jobs-config and a fast lag sampler, and one on 0.0.0.0 with a token (no offset reset).
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import re
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from deltalake import DeltaTable
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from pylog.launch.process import BrokerProcess, ConsoleProcess
from tests.support.clients import create_topic, produce
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKEN = "console-test-token-0123456789"
T0 = 1_767_225_600_000              # 2026-01-01T00:00:00Z: the "mixed" topic's records are one second apart
MIXED = [(b"k0", b"plain text"), (b"k1", b'{"id":1,"tags":["a","b"]}'), (b"\xff\xfe", b"\x00\x9f\x92\x96binary"),
         (None, b'{"id":2}'), (b"k4", b"last")]
ORDERS = 3                          # partitions of "orders", 20 records on each

pytestmark = pytest.mark.timeout(180)


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("PYLOG_TEST_ARTIFACTS") or REPO / ".cache" / "test-artifacts" / "console")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("console-broker") / "data",
                            settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        create_topic(process.bootstrap, "orders", partitions=ORDERS)
        for p in range(ORDERS):
            produce(process.bootstrap, "orders", [(f"o{p}-{i}".encode(), f'{{"n":{i}}}'.encode()) for i in range(20)],
                    partition=p)
        create_topic(process.bootstrap, "mixed", partitions=1)
        producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0})
        for i, (key, value) in enumerate(MIXED):
            producer.produce("mixed", value, key, partition=0, timestamp=T0 + 1000 * i)
        assert producer.flush(15) == 0
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def job_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two jobs: `clicks` with a real Delta table (the app's offsets stored by delta_commit's own generation
    claim, as a job's first start stores them) and `later` whose table does not exist yet."""
    from connectors.delta_commit import claim_generation

    root = tmp_path_factory.mktemp("console-jobs")
    claim_generation(str(root / "clicks-table"), "clicks-app", pa.schema([("value", pa.binary())]),
                     starts=lambda state: {("orders", 0): 5, ("orders", 1): 20, ("orders", 2): 0})
    (root / "clicks.properties").write_text("source.topics=orders\nsink.table.path=clicks-table\n"
                                            "sink.app.id=clicks-app\n")
    (root / "later.properties").write_text("source.topics=orders\nsink.table.path=later-table\n")
    # one failed run of `later` in its run history (jobs.run_history), as `pylog job batch_load` records it
    from jobs.config import JobConfig
    from jobs.run_history import recorded
    with contextlib.suppress(ValueError), recorded(JobConfig("batch_load", {"sink.table.path": str(
            root / "later-table")}), "later") as run:
        run.plan({("orders", 0): 0}, {("orders", 0): 20})
        raise ValueError("Topic orders was re-created")
    return {"clicks": root / "clicks.properties", "later": root / "later.properties"}


@pytest.fixture(scope="module")
def consoles(broker: BrokerProcess, job_files: dict[str, Path],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ConsoleProcess]]:
    root = tmp_path_factory.mktemp("consoles")
    started = {
        "open": ConsoleProcess(root / "open", broker.bootstrap, [
            "--allow-offset-reset", "--lag-interval", "0.5", "--jobs-config", str(job_files["clicks"]),
            "--jobs-config", str(job_files["later"])]),
        "token": ConsoleProcess(root / "token", broker.bootstrap, ["--token", TOKEN], host="0.0.0.0"),
    }
    try:
        for c in started.values():
            c.start()
        yield started
    finally:
        for c in started.values():
            assert c.stop() == 0, c.log_text()[-2000:]
        assert "Traceback" not in started["open"].log_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.TemporaryDirectory(prefix="pylog-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900", f"--user-data-dir={profile.name}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        profile.cleanup()


@pytest.fixture(scope="module")
def shot(browser: WebDriver, artifacts: Path) -> Callable[[str], None]:
    def save(name: str) -> None:
        assert browser.save_screenshot(str(artifacts / f"{name}.png")), name
    return save


# ---------------------------------------------------------------- helpers
def rows(browser: WebDriver, table: str) -> list[dict[str, str]]:
    """A table's body rows as {its column's heading, lower case, hyphens for spaces: the cell's text}, read in one
    script call."""
    return browser.execute_script("""
        const table = document.querySelector(arguments[0]);
        const names = Array.from(table.tHead.rows[0].cells).map(th =>
            th.innerText.trim().toLowerCase().replace(/ +/g, '-'));
        return Array.from(table.tBodies[0].rows).map(tr =>
            Object.fromEntries(Array.from(tr.cells).map((td, i) => [names[i], td.innerText.trim()])));""", table)


def click(browser: WebDriver, element: WebElement) -> None:
    """Click a link or a submit button and wait for the next page to replace this one."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.click()

    def replaced(_: WebDriver) -> bool:
        try:
            page.tag_name
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException:          # in the middle of the navigation
            return False

    WebDriverWait(browser, 15).until(replaced)
    WebDriverWait(browser, 15).until(lambda b: b.execute_script("return document.readyState") == "complete")


def text(browser: WebDriver, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def status(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=15) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def error_sentence(page: str) -> str:
    found = re.search(r'<p id="error-message" class="error">(.*?)</p>', page, re.S)
    assert found, page[-500:]
    return html.unescape(found.group(1))


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "console-test-watermarks"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        c.close()


def disk_size(broker: BrokerProcess, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)]
    finally:
        c.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def member_of(bootstrap: str, group: str, topic: str) -> tuple[Consumer, list[Any]]:
    """A consumer of `group`, subscribed to `topic` and with its partitions assigned (the group is Stable), and the
    records it read while it waited for them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([topic])
    read: list[Any] = []
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        read.extend(m for m in c.consume(100, 0.1) if m.error() is None)
    assert c.assignment(), f"{group} got no partitions"
    return c, read


# ---------------------------------------------------------------- pages
def test_the_topics_page_lists_each_topic_with_its_partitions_messages_and_size(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/topics"))
    shown = {r["topic"]: r for r in rows(browser, "#topics")}
    shot("topics")
    assert set(shown) == {"orders", "mixed"}                            # __consumer_offsets hidden by default
    assert (shown["orders"]["partitions"], shown["orders"]["messages"]) == (str(ORDERS), str(20 * ORDERS))
    assert (shown["mixed"]["partitions"], shown["mixed"]["messages"]) == ("1", str(len(MIXED)))
    sizes = browser.execute_script("return Object.fromEntries(Array.from(document.querySelectorAll("
                                   "'#topics tbody tr')).map(tr => [tr.dataset.topic, tr.querySelector('td[data-bytes]')"
                                   ".dataset.bytes]))")
    assert int(sizes["orders"]) == sum(disk_size(broker, "orders", p) for p in range(ORDERS)) > 0
    click(browser, browser.find_element(By.LINK_TEXT, "show"))
    assert "__consumer_offsets" in {r["topic"] for r in rows(browser, "#topics")}


def test_a_topic_page_shows_leader_replicas_isr_offsets_and_size_of_each_partition(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/topics"))
    click(browser, browser.find_element(By.LINK_TEXT, "orders"))
    shown = rows(browser, "#partitions")
    shot("topic-orders")
    assert text(browser, "#partition-count") == str(ORDERS)
    expected = watermarks(broker.bootstrap, "orders", ORDERS)
    assert [(int(r["log-start"]), int(r["high-watermark"])) for r in shown] == expected == [(0, 20)] * ORDERS
    assert [(r["partition"], r["leader"], r["replicas"], r["isr"]) for r in shown] == \
        [(str(p), "0", "0", "0") for p in range(ORDERS)]
    sizes = browser.execute_script("return Array.from(document.querySelectorAll('#partitions td[data-bytes]'))"
                                   ".map(td => Number(td.dataset.bytes))")
    assert sizes == [disk_size(broker, "orders", p) for p in range(ORDERS)]


def test_messages_by_offset_in_each_format_with_a_non_utf8_value_shown_as_hex(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/topics/mixed"))
    click(browser, browser.find_element(By.CSS_SELECTOR, "#partitions a"))
    assert (text(browser, "#log-start"), text(browser, "#high-watermark")) == ("0", str(len(MIXED)))
    assert [r["offset"] for r in rows(browser, "#records")] == [str(i) for i in range(len(MIXED))]
    form = browser.find_element(By.ID, "browse")
    form.find_element(By.NAME, "offset").send_keys("1")
    Select(form.find_element(By.NAME, "value_format")).select_by_visible_text("JSON")
    click(browser, form.find_element(By.CSS_SELECTOR, "button"))
    shown = rows(browser, "#records")
    shot("messages-json")
    assert [r["offset"] for r in shown] == ["1", "2", "3", "4"]
    assert json.loads(shown[0]["value"]) == {"id": 1, "tags": ["a", "b"]}
    assert shown[0]["value"].startswith('{\n  "id": 1,')                       # pretty
    assert shown[1]["value"] == "00 9f 92 96 62 69 6e 61 72 79\nnot UTF-8: shown as hex"
    assert shown[1]["key"] == "ff fe\nnot UTF-8: shown as hex"
    assert shown[3]["value"] == "last\nnot JSON: shown as UTF-8"
    Select(browser.find_element(By.NAME, "key_format")).select_by_visible_text("hex")
    Select(browser.find_element(By.NAME, "value_format")).select_by_visible_text("hex")
    click(browser, browser.find_element(By.CSS_SELECTOR, "#browse button"))
    shown = rows(browser, "#records")
    shot("messages-hex")
    assert (shown[0]["key"], shown[3]["value"]) == ("6b 31", "6c 61 73 74")
    assert browser.current_url.endswith("offset=1&timestamp=&limit=20&key_format=hex&value_format=hex")


def test_messages_from_a_timestamp_start_at_the_first_record_at_or_after_it(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/topics/mixed/0"))
    browser.find_element(By.NAME, "timestamp").send_keys("2026-01-01T00:00:02.500Z")
    click(browser, browser.find_element(By.CSS_SELECTOR, "#browse button"))
    shown = rows(browser, "#records")
    shot("messages-by-time")
    assert text(browser, "#start") == "3" and [r["offset"] for r in shown] == ["3", "4"]
    assert shown[0]["timestamp"] == "2026-01-01T00:00:03.000Z CreateTime"
    browser.get(consoles["open"].url(f"/topics/mixed/0?timestamp={T0 + 60_000}"))
    assert rows(browser, "#records") == []
    assert text(browser, "#browse-note") == "no message at or after 2026-01-01T00:01:00.000Z: the partition ends at offset 5"


@pytest.mark.parametrize("path, code, sentence", [
    ("/topics/nope", 404, "unknown topic 'nope': the topics page lists the topics the cluster has"),
    ("/topics/mixed/0?offset=9", 400, "offset 9 is beyond the end of mixed-0 (high watermark 5): pick an offset "
                                      "from 0 to 5"),
    ("/topics/orders/7", 400, "topic 'orders' has no partition 7: it has 3 partitions, pick 0 to 2"),
    ("/topics/mixed/0?timestamp=last+tuesday", 400, "bad timestamp 'last tuesday': expected epoch milliseconds or "
                                                    "ISO-8601 such as 2024-01-31T10:00:00.000 (UTC unless a zone such "
                                                    "as +02:00 is given)"),
    ("/groups/nobody", 404, "consumer group 'nobody' does not exist: the groups page lists the groups the cluster "
                            "has"),
])
def test_bad_input_is_a_page_with_one_sentence_and_a_4xx_status(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], shot: Callable[[str], None], path: str, code: int,
        sentence: str) -> None:
    got, page = status(consoles["open"].url(path))
    assert (got, error_sentence(page)) == (code, sentence)
    browser.get(consoles["open"].url(path))
    assert text(browser, "#error-message") == sentence
    assert text(browser, "#error-title").startswith(str(code))
    shot("error-" + re.sub(r"\W+", "-", path.strip("/"))[:50])


def test_a_groups_lag_falls_in_the_chart_and_the_table_as_its_consumer_catches_up(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    commit(broker.bootstrap, "billing", {("orders", p): 5 * p for p in range(ORDERS)})      # lag 20, 15, 10
    browser.get(consoles["open"].url("/groups/billing"))
    assert [(r["partition"], r["committed"], r["high-watermark"], r["lag"]) for r in rows(browser, "#lags")] == \
        [(str(p), str(5 * p), "20", str(20 - 5 * p)) for p in range(ORDERS)]
    assert (text(browser, "#group-state"), text(browser, "#total-lag")) == ("Empty", "45")
    wait_for(lambda: browser.find_element(By.ID, "lag-chart").get_attribute("data-last-lag") == "45", 10,
             "the chart's first samples")
    consumer, early = member_of(broker.bootstrap, "billing", "orders")
    try:
        read, deadline = len(early), time.monotonic() + 20
        while read < 45 and time.monotonic() < deadline:
            read += sum(1 for m in consumer.consume(100, 0.5) if m.error() is None)
        assert read == 45
        consumer.commit(asynchronous=False)
        wait_for(lambda: browser.find_element(By.ID, "lag-chart").get_attribute("data-last-lag") == "0", 10,
                 "the chart reaches lag 0")
        chart = browser.find_element(By.ID, "lag-chart")
        points = browser.find_element(By.ID, "lag-line").get_attribute("points").split()
        assert int(chart.get_attribute("data-points")) >= 2 and len(points) >= 2
        assert float(points[0].split(",")[1]) < float(points[-1].split(",")[1])   # y grows downwards: 45 above 0
        assert text(browser, "#lag-max") == "45"
        samples = json.loads(status(consoles["open"].url("/groups/billing/lag.json"))[1])["points"]
        assert samples[0][1] == 45 and samples[-1][1] == 0 and [s[1] for s in samples] == \
            sorted((s[1] for s in samples), reverse=True)
        browser.refresh()
        shot("group-billing")
        assert [r["lag"] for r in rows(browser, "#lags")] == ["0"] * ORDERS
        assert (text(browser, "#group-state"), text(browser, "#member-count")) == ("Stable", "1")
        (member,) = rows(browser, "#members")
        assert member["assignment"] == ", ".join(f"orders-{p}" for p in range(ORDERS))
        browser.get(consoles["open"].url("/groups"))
        shot("groups")
        (listed,) = [r for r in rows(browser, "#groups") if r["group"] == "billing"]
        assert (listed["state"], listed["members"], listed["topics"], listed["lag"]) == ("Stable", "1", "orders", "0")
    finally:
        consumer.close()


def test_an_offset_reset_shows_its_plan_needs_the_name_typed_again_and_commits(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    commit(broker.bootstrap, "audit", {("orders", p): 20 for p in range(ORDERS)})

    def plan_to_offset_7() -> None:
        browser.get(consoles["open"].url("/groups/audit"))
        click(browser, browser.find_element(By.ID, "reset-link"))
        Select(browser.find_element(By.NAME, "to")).select_by_visible_text("offset")
        browser.find_element(By.NAME, "offset").send_keys("7")
        click(browser, browser.find_element(By.CSS_SELECTOR, "#reset button"))

    plan_to_offset_7()
    shot("reset-plan")
    assert [(r["current"], r["new"]) for r in rows(browser, "#plan")] == [("20", "7")] * ORDERS
    assert committed(broker.bootstrap, "audit", "orders", ORDERS) == [20] * ORDERS      # a plan changes nothing
    browser.find_element(By.NAME, "confirm_group").send_keys("Audit")
    click(browser, browser.find_element(By.CSS_SELECTOR, "#confirm button"))
    assert text(browser, "#error-message").startswith("the name typed ('Audit') is not the group's ('audit')")
    assert committed(broker.bootstrap, "audit", "orders", ORDERS) == [20] * ORDERS
    plan_to_offset_7()
    browser.find_element(By.NAME, "confirm_group").send_keys("audit")
    click(browser, browser.find_element(By.CSS_SELECTOR, "#confirm button"))
    shot("reset-done")
    assert text(browser, "#reset-result") == "Reset the offsets of group 'audit' for 3 partitions."
    assert committed(broker.bootstrap, "audit", "orders", ORDERS) == [7] * ORDERS


def test_an_offset_reset_is_refused_while_the_group_has_members_and_on_a_console_without_the_flag(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    consumer, _ = member_of(broker.bootstrap, "busy", "orders")
    try:
        browser.get(consoles["open"].url("/groups/busy/reset"))
        click(browser, browser.find_element(By.CSS_SELECTOR, "#reset button"))
        shot("reset-refused-members")
        assert text(browser, "#error-title") == "409 Refused"
        assert text(browser, "#error-message") == ("Assignments can only be reset if the group 'busy' is inactive, "
                                                    "but the current state is Stable. Stop its consumers, then reset.")
    finally:
        consumer.close()
    got, page = status(consoles["token"].url("/groups/busy/reset"), {"Authorization": f"Bearer {TOKEN}"})
    assert (got, error_sentence(page)) == (403, "resetting offsets is off in this console: start it with "
                                                "--allow-offset-reset to allow it (or use pylog groups reset-offsets)")


def test_a_console_with_a_token_answers_401_without_it_and_keeps_it_in_an_http_only_cookie(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    console = consoles["token"]
    commit(broker.bootstrap, "token-check", {("orders", 0): 1})
    browser.get(console.url("/topics"))
    shot("token-missing")
    assert text(browser, "#error-title") == "401 Token needed"
    assert text(browser, "#error-message").startswith("this console needs its token: open the page once with "
                                                      "?token=<token>")
    browser.get(console.url("/topics?token=wrong-token"))
    shot("token-wrong")
    assert text(browser, "#error-message").startswith("the token given is wrong")
    assert status(console.url("/topics"), {"Authorization": "Bearer wrong-token"})[0] == 401
    browser.get(console.url(f"/topics?token={TOKEN}"))
    assert browser.current_url == console.url("/topics")                       # the token left the address bar
    assert {r["topic"] for r in rows(browser, "#topics")} == {"orders", "mixed"}
    assert TOKEN not in browser.execute_script("return document.cookie")       # HttpOnly: no script reads it
    click(browser, browser.find_element(By.LINK_TEXT, "Groups"))
    assert "token-check" in {r["group"] for r in rows(browser, "#groups")}
    browser.delete_all_cookies()


def test_a_loopback_console_without_a_token_refuses_a_request_for_another_host_name(
        consoles: dict[str, ConsoleProcess]) -> None:
    """A page elsewhere whose name resolves to 127.0.0.1 (DNS rebinding) cannot read the console."""
    console = consoles["open"]
    got, page = status(console.url("/topics"), {"Host": f"rebound.example:{console.port}"})
    assert (got, error_sentence(page)) == (403, "this console answers only requests for a loopback address: open "
                                                f"http://127.0.0.1:{console.port}/ instead")
    assert status(console.url("/topics"), {"Host": f"localhost:{console.port}"})[0] == 200


def test_the_brokers_page_shows_the_broker_and_the_controller(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], broker: BrokerProcess, shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/brokers"))
    shot("brokers")
    assert text(browser, "#controller-id") == "0"
    (row,) = rows(browser, "#brokers")
    assert (row["id"], row["address"], row["role"]) == ("0", broker.bootstrap, "controller")
    assert int(row["leaders"]) == int(row["replicas"]) >= ORDERS + 1


def test_the_jobs_page_shows_each_tables_version_and_stored_offsets_with_their_lag(
        browser: WebDriver, consoles: dict[str, ConsoleProcess], job_files: dict[str, Path],
        shot: Callable[[str], None]) -> None:
    browser.get(consoles["open"].url("/jobs"))
    shot("jobs")
    clicks = browser.find_element(By.CSS_SELECTOR, 'section[data-job="clicks"]')
    assert clicks.find_element(By.CSS_SELECTOR, ".app-id").text == "clicks-app"
    assert clicks.find_element(By.CSS_SELECTOR, ".table-path").text == str(job_files["clicks"].parent / "clicks-table")
    assert (clicks.find_element(By.CSS_SELECTOR, ".version").text,
            clicks.find_element(By.CSS_SELECTOR, ".generation").text) == \
        (str(DeltaTable(str(job_files["clicks"].parent / "clicks-table")).version()), "0")
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", clicks.find_element(By.CSS_SELECTOR,
                                                                                        ".last-commit").text)
    stored = rows(browser, 'section[data-job="clicks"] .offsets')
    assert [(r["stored-offset"], r["high-watermark"], r["lag"]) for r in stored] == \
        [("5", "20", "15"), ("20", "20", "0"), ("0", "20", "20")]
    assert clicks.find_element(By.CSS_SELECTOR, ".total-lag").text == "35"
    later = browser.find_element(By.CSS_SELECTOR, 'section[data-job="later"] .problem')
    assert later.text == f"no table at {job_files['later'].parent / 'later-table'} yet: the job has not committed a batch"
    [run] = browser.find_elements(By.CSS_SELECTOR, 'section[data-job="later"] .runs tbody tr')
    assert (run.find_element(By.CSS_SELECTOR, ".outcome").text, run.find_element(By.CSS_SELECTOR, ".message").text) \
        == ("failed", "Topic orders was re-created")
