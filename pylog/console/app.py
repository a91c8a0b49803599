"""The console's Flask app: the factory, the routes (one small function per page) and the error pages.

Owns: the URL map, the request guard (access.py's Host and token rules: a right `?token=` sets the cookie and
redirects to the same page without it), turning each page's data (cluster_view, messages, offset_reset,
jobs_view, lag_history) into a server-rendered template, and the error pages: a ConsoleError is its status and
its one sentence; an unknown URL a 404 naming it; anything unexpected a 500 whose traceback goes to the log at
debug level only.
Must never: show a stack trace or a token in a page, or write to the cluster outside offset_reset.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers.response import Response as BaseResponse

from pylog.console import access, jobs_view, messages, offset_reset
from pylog.console.cluster_view import ClusterView
from pylog.console.errors import ConsoleError, Forbidden, NotFound, Unauthorized
from pylog.console.lag_history import LagHistory

log = logging.getLogger(__name__)

STATIC_MAX_AGE_S = 3600
FRESH_MS = 1000     # lag.json samples the group itself when its last point is older than this


@dataclass(frozen=True)
class ConsoleSettings:
    host: str = "127.0.0.1"
    token: str | None = None
    allow_offset_reset: bool = False
    lag_interval_s: float = 5.0
    jobs: tuple[jobs_view.JobSource, ...] = ()
    form_key: str = field(default_factory=access.new_form_key)


def create_app(settings: ConsoleSettings, cluster: ClusterView, history: LagHistory) -> Flask:
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.jinja_env.trim_blocks = app.jinja_env.lstrip_blocks = True       # a thousand rows: no blank lines between
    app.config["SEND_FILE_MAX_AGE_DEFAULT"] = STATIC_MAX_AGE_S          # the pages' URLs of them carry the version
    app.jinja_env.filters["size"] = human_size
    app.jinja_env.globals.update(settings=settings, iso_time=messages.iso_time, static_version=_static_version(app))
    _guard(app, settings)
    _error_pages(app)
    _topic_pages(app, cluster)
    _group_pages(app, settings, cluster, history)
    _other_pages(app, settings, cluster)
    return app


def _static_version(app: Flask) -> str:
    """A digest of the static files: their URLs change with their content, so browsers may cache them."""
    digest = hashlib.sha256()
    for path in sorted(Path(app.static_folder or "").glob("*")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


# ---------------------------------------------------------------- the guard and the error pages
def _guard(app: Flask, settings: ConsoleSettings) -> None:
    @app.before_request
    def guard() -> BaseResponse | None:
        if not access.host_allowed(settings.host, settings.token, request.host):
            raise Forbidden(f"this console answers only requests for a loopback address: open "
                            f"http://127.0.0.1:{request.environ.get('SERVER_PORT', '')}/ instead")
        if request.endpoint == "static":
            return None
        verdict = access.verdict(settings.token, request.headers.get("Authorization"),
                                 request.args.get(access.QUERY), request.cookies.get(access.COOKIE))
        if verdict is access.Verdict.MISSING:
            raise Unauthorized("this console needs its token: open the page once with ?token=<token> (the --token "
                               f"or {access.TOKEN_ENV} it was started with), or send Authorization: Bearer <token>")
        if verdict is access.Verdict.WRONG:
            raise Unauthorized("the token given is wrong: open the page again with ?token=<token>, using the "
                               f"--token or {access.TOKEN_ENV} the console was started with")
        if verdict is access.Verdict.ALLOW_AND_SET_COOKIE:
            rest = [(k, v) for k, values in request.args.lists() if k != access.QUERY for v in values]
            response = redirect(request.path + (f"?{urlencode(rest)}" if rest else ""), code=303)
            response.set_cookie(access.COOKIE, request.args[access.QUERY], httponly=True, samesite="Strict",
                                path="/")
            return response
        return None


def _error_pages(app: Flask) -> None:
    @app.errorhandler(ConsoleError)
    def console_error(e: ConsoleError) -> tuple[str, int, dict[str, str]]:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(e, Unauthorized) else {}
        return render_template("error.html", status=e.status, title=e.title, message=str(e)), e.status, headers

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> tuple[str, int]:
        status = e.code or 500
        message = (f"there is no page at {request.path}: start from the topics page" if status == 404 else
                   f"{request.method} is not allowed on {request.path}" if status == 405 else
                   f"{e.name}: {e.description}")
        return render_template("error.html", status=status, title=e.name, message=message), status

    @app.errorhandler(Exception)
    def unexpected(e: Exception) -> tuple[str, int]:
        log.warning("unexpected error on %s %s: %s: %s", request.method, request.path, type(e).__name__, e)
        log.debug("traceback of the unexpected error", exc_info=e)
        message = (f"the console failed unexpectedly on this page ({type(e).__name__}): see its log, run with "
                   f"--log-level DEBUG for the details")
        return render_template("error.html", status=500, title="Console error", message=message), 500


# ---------------------------------------------------------------- topics and messages
def _topic_pages(app: Flask, cluster: ClusterView) -> None:
    @app.get("/")
    def home() -> BaseResponse:
        return redirect(url_for("topics"))

    @app.get("/topics")
    def topics() -> str:
        internal = request.args.get("internal") == "1"
        found = cluster.topics()
        rows = [t for t in found.rows if internal or not t.internal]
        return render_template("topics.html", rows=rows, internal=internal, sizes_note=found.sizes_note,
                               hidden=len(found.rows) - len(rows))

    @app.get("/topics/<topic>")
    def topic(topic: str) -> str:
        found = cluster.topic(topic)
        return render_template("topic.html", topic=found.rows[0], sizes_note=found.sizes_note)

    @app.get("/topics/<topic>/<partition>")
    def partition_messages(topic: str, partition: str) -> str:
        p = messages.parse_partition(partition, topic, cluster.partition_count(topic))
        a = request.args
        browse = messages.parse_browse(a.get("offset"), a.get("timestamp"), a.get("limit"), a.get("key_format"),
                                       a.get("value_format"))
        low, high = cluster.watermarks(topic, p)
        note = None
        if browse.offset is not None:
            messages.check_offset(topic, p, browse.offset, low, high)
            start = browse.offset
        elif browse.timestamp_ms is not None:
            found = cluster.offset_for_time(topic, p, browse.timestamp_ms)
            start = found if found >= 0 else high
            if found < 0:
                note = (f"no message at or after {messages.iso_time(browse.timestamp_ms)}: the partition ends at "
                        f"offset {high}")
        else:
            start = messages.last_page_start(low, high, browse.limit)
        records = messages.show_records(cluster.read(topic, p, start, browse.limit, high), browse.key_format,
                                        browse.value_format)
        return render_template("messages.html", topic=topic, partition=p, log_start=low, high_watermark=high,
                               start=start, browse=browse, records=records, note=note, formats=messages.FORMATS,
                               format_names=messages.FORMAT_NAMES)


# ---------------------------------------------------------------- groups, lag and the offset reset
def _group_pages(app: Flask, settings: ConsoleSettings, cluster: ClusterView, history: LagHistory) -> None:
    @app.get("/groups")
    def groups() -> str:
        return render_template("groups.html", rows=cluster.groups())

    @app.get("/groups/<path:group>")
    def group(group: str) -> str:
        return render_template("group.html", group=cluster.group(group),
                               interval_ms=int(settings.lag_interval_s * 1000))

    @app.get("/groups/<path:group>/lag.json")
    def group_lag(group: str) -> Response:
        points = history.points(group)
        now_ms = int(time.time() * 1000)
        if not points or now_ms - points[-1][0] >= FRESH_MS:   # the chart's last point is the lag now
            row = cluster.group(group)      # a 404 for a group that does not exist
            history.record(now_ms, {group: row.total_lag})
            points = history.points(group)
        return jsonify({"group": group, "interval_ms": int(settings.lag_interval_s * 1000),
                        "points": [[at, lag] for at, lag in points]})

    @app.get("/groups/<path:group>/reset")
    def reset_form(group: str) -> str:
        offset_reset.check_allowed(settings.allow_offset_reset)
        row = cluster.group(group)
        return render_template("reset.html", group=row, targets=offset_reset.TARGETS)

    @app.post("/groups/<path:group>/reset")
    def reset_plan(group: str) -> str:
        offset_reset.check_allowed(settings.allow_offset_reset)
        wanted = _reset_request(group)
        return render_template("reset_plan.html", request_=wanted, plan=offset_reset.plan(cluster, wanted))

    @app.post("/groups/<path:group>/reset/apply")
    def reset_apply(group: str) -> str:
        offset_reset.check_allowed(settings.allow_offset_reset)
        wanted = _reset_request(group)
        done = offset_reset.apply(cluster, wanted, request.form.get("confirm_group", ""), settings.form_key,
                                  request.form.get("form_key"))
        return render_template("reset_done.html", request_=wanted, plan=done)


def _reset_request(group: str) -> offset_reset.ResetRequest:
    f = request.form
    return offset_reset.parse_request(group, f.get("topic"), f.get("to"), f.get("offset"))


# ---------------------------------------------------------------- brokers and jobs
def _other_pages(app: Flask, settings: ConsoleSettings, cluster: ClusterView) -> None:
    @app.get("/brokers")
    def brokers() -> str:
        return render_template("brokers.html", cluster=cluster.cluster())

    @app.get("/jobs")
    def jobs() -> str:
        if not settings.jobs:
            raise NotFound("no jobs are configured: start the console with --jobs-config FILE (a job's "
                           ".properties file), once per job")
        tables = [jobs_view.read_job(job, cluster.end_offsets) for job in settings.jobs]
        return render_template("jobs.html", tables=tables)
