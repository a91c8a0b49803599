"""The console's Flask app where no broker is needed (Flask's test client): the token and Host guard, the pages
of a broker that is down, unknown pages, the offset-reset guards, and no stack trace anywhere."""
from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from pylog.cli import build_parser
from pylog.console.access import COOKIE
from pylog.console.app import ConsoleSettings, create_app
from pylog.console.cluster_view import ClusterView
from pylog.console.jobs_view import JobsConfigError, load_job, read_job
from pylog.console.lag_history import LagHistory
from pylog.launch.process import free_port

TOKEN = "s3cret-token-0123456789"


def app_for(**settings: object) -> Flask:
    """The console's app on a bootstrap address where nothing listens."""
    args = build_parser().parse_args(["console", "--bootstrap-server", f"127.0.0.1:{free_port()}"])
    return create_app(ConsoleSettings(**settings), ClusterView(args), LagHistory(10))  # type: ignore[arg-type]


def message(html: str) -> str:
    found = re.search(r'<p id="error-message" class="error">(.*?)</p>', html, re.S)
    assert found, html
    return html_lib.unescape(found.group(1))


@pytest.fixture
def client() -> FlaskClient:
    return app_for().test_client()


def test_a_broker_that_is_down_is_a_503_page_naming_it(client: FlaskClient) -> None:
    for path in ("/topics", "/topics/events", "/topics/events/0", "/groups", "/groups/g", "/brokers"):
        r = client.get(path, headers={"Host": "127.0.0.1:8080"})
        assert r.status_code == 503, path
        text = message(r.text)
        assert re.match(r"broker unreachable at 127\.0\.0\.1:\d+ \(Connection refused\): start the broker, or "
                        r"point --bootstrap-server at a running one$", text), text
        assert "Traceback" not in r.text and 'File "' not in r.text


def test_an_unknown_page_is_a_404_naming_it(client: FlaskClient) -> None:
    r = client.get("/nowhere", headers={"Host": "localhost:8080"})
    assert r.status_code == 404 and message(r.text) == "there is no page at /nowhere: start from the topics page"
    r = client.post("/topics", headers={"Host": "localhost:8080"})
    assert r.status_code == 405 and message(r.text) == "POST is not allowed on /topics"


def test_a_loopback_console_refuses_a_foreign_host_name(client: FlaskClient) -> None:
    r = client.get("/topics", headers={"Host": "rebound.example:8080"}, base_url="http://127.0.0.1:8080")
    assert r.status_code == 403
    assert message(r.text) == ("this console answers only requests for a loopback address: open "
                               "http://127.0.0.1:8080/ instead")


def test_with_a_token_a_request_without_it_or_with_a_wrong_one_is_a_401() -> None:
    client = app_for(host="0.0.0.0", token=TOKEN).test_client()
    r = client.get("/topics", headers={"Host": "console.example:8080"})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert message(r.text).startswith("this console needs its token: open the page once with ?token=<token>")
    r = client.get("/topics", headers={"Authorization": "Bearer wrong-token-0000000"})
    assert r.status_code == 401 and message(r.text).startswith("the token given is wrong")
    r = client.get("/topics?token=wrong")
    assert r.status_code == 401 and TOKEN not in r.text and "wrong" not in r.headers.get("Set-Cookie", "")
    assert client.get("/static/console.css").status_code == 200          # the stylesheet of the 401 page itself


def test_the_right_token_in_the_query_sets_a_strict_http_only_cookie_and_leaves_the_url() -> None:
    client = app_for(host="0.0.0.0", token=TOKEN).test_client()
    r = client.get(f"/topics/events/0?offset=3&token={TOKEN}&value_format=hex")
    assert r.status_code == 303 and r.headers["Location"] == "/topics/events/0?offset=3&value_format=hex"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    r = client.get("/topics")                                            # the cookie now: past the guard
    assert r.status_code == 503
    r = client.get("/topics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 503


def test_an_offset_reset_is_refused_unless_allowed_and_confirmed_on_this_consoles_form() -> None:
    off = app_for().test_client()
    for r in (off.get("/groups/g/reset"), off.post("/groups/g/reset", data={"to": "earliest"}),
              off.post("/groups/g/reset/apply", data={"to": "earliest", "confirm_group": "g"})):
        assert r.status_code == 403
        assert message(r.text) == ("resetting offsets is off in this console: start it with --allow-offset-reset "
                                   "to allow it (or use pylog groups reset-offsets)")
    settings = ConsoleSettings(allow_offset_reset=True)
    on = app_for(allow_offset_reset=True, form_key=settings.form_key).test_client()
    r = on.post("/groups/g/reset", data={"to": "yesterday"})
    assert r.status_code == 400 and message(r.text) == "bad reset target 'yesterday': choose one of earliest, latest, offset"
    r = on.post("/groups/g/reset", data={"to": "offset", "offset": "x"})
    assert r.status_code == 400 and message(r.text).startswith("bad offset 'x'")
    r = on.post("/groups/g/reset/apply", data={"to": "earliest", "confirm_group": "g", "form_key": "forged"})
    assert r.status_code == 403 and message(r.text).startswith("this reset did not come from this console's own form")
    r = on.post("/groups/g/reset/apply", data={"to": "earliest", "confirm_group": "G", "form_key": settings.form_key})
    assert r.status_code == 400
    assert message(r.text) == ("the name typed ('G') is not the group's ('g'): nothing was changed, type the "
                               "group's name exactly to confirm")


def test_the_jobs_page_needs_jobs_and_a_job_file_needs_its_table(tmp_path: Path) -> None:
    r = app_for().test_client().get("/jobs")
    assert r.status_code == 404 and message(r.text).startswith("no jobs are configured: start the console with --jobs-config")
    job = tmp_path / "clicks.properties"
    job.write_text("source.topics=clicks\nsink.table.path=tables/clicks\n")
    source = load_job(str(job))
    assert (source.name, source.app_id, source.topics) == ("clicks", "clicks", ("clicks",))
    assert source.table_path == str(tmp_path / "tables" / "clicks")          # relative to the file
    table = read_job(source, lambda tps: {})
    assert table.version is None and table.problem == (f"no table at {tmp_path / 'tables' / 'clicks'} yet: the job "
                                                       "has not committed a batch")
    (tmp_path / "broken.properties").write_text("source.topics=clicks\n")
    with pytest.raises(JobsConfigError, match=r"broken.properties: job broken: setting 'sink.table.path' is required"):
        load_job(str(tmp_path / "broken.properties"))


def test_the_command_refuses_another_address_without_a_token_in_one_line(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pylog.cli import main

    monkeypatch.delenv("PYLOG_CONSOLE_TOKEN", raising=False)
    assert main(["console", "--host", "0.0.0.0", "--port", str(free_port())]) == 1
    assert capsys.readouterr().err == ("pylog console: error: binding to 0.0.0.0 needs a token: pass --token or set "
                                       "PYLOG_CONSOLE_TOKEN (or keep the default --host 127.0.0.1)\n")
    (tmp_path / "job.properties").write_text("source.topics=a\n")
    assert main(["console", "--jobs-config", str(tmp_path / "job.properties")]) == 1
    assert capsys.readouterr().err.endswith("job.properties: job job: setting 'sink.table.path' is required\n")
