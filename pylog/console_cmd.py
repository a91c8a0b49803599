"""`pylog console`: a small read-mostly web console of a Kafka-protocol cluster (pylog's broker or Apache Kafka).

Owns: the `console` arguments, the checks made before anything starts (the binding rule and the token, the
--jobs-config files), starting the lag sampler and serving the Flask app (pylog/console/app.py) with waitress,
and a clean stop on SIGTERM or Ctrl-C (exit 0).
Must never: start on an address other than loopback without a token, or print the token.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from pylog.console.access import TOKEN_ENV, AccessError, check_binding
from pylog.console.jobs_view import JobsConfigError, JobSource, load_job
from pylog.tools.client import add_connection_args
from pylog.tools.errors import CliError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_LAG_INTERVAL_S = 5.0
DEFAULT_LAG_POINTS = 720             # an hour at the default interval
SERVER_THREADS = 4

log = logging.getLogger(__name__)


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "console", help="a small web console: topics, messages, groups and lag, jobs' Delta tables, brokers",
        description="Serve a read-mostly web console of the cluster at --bootstrap-server (any Kafka-protocol "
                    "broker). It binds to 127.0.0.1 unless --host says otherwise, and then needs a token.")
    add_connection_args(parser)
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}; any other needs a token)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--token", default=None,
                        help=f"every request must present this token (default: ${TOKEN_ENV}); needed on any "
                             f"address but loopback")
    parser.add_argument("--allow-offset-reset", action="store_true",
                        help="allow resetting a group's offsets from its page (each reset shows its plan and is "
                             "confirmed by typing the group's name; refused while the group has members)")
    parser.add_argument("--jobs-config", action="append", default=[], metavar="FILE",
                        help="a job's .properties file (as conf/jobs/*.properties), repeatable: its Delta table, "
                             "version and stored offsets on the jobs page")
    parser.add_argument("--lag-interval", type=float, default=DEFAULT_LAG_INTERVAL_S, metavar="SECONDS",
                        help=f"how often every group's lag is sampled for the charts (default "
                             f"{DEFAULT_LAG_INTERVAL_S:g})")
    parser.add_argument("--lag-history", type=int, default=DEFAULT_LAG_POINTS, metavar="N",
                        help=f"samples kept per group (default {DEFAULT_LAG_POINTS})")
    parser.set_defaults(func=run)


def _checked(args: argparse.Namespace) -> tuple[str | None, tuple[JobSource, ...]]:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    try:
        check_binding(args.host, token)
    except AccessError as e:
        raise CliError(str(e)) from None
    if not 0 <= args.port <= 65535:
        raise CliError(f"bad --port {args.port}: expected 0-65535")
    if args.lag_interval < 0.1 or args.lag_history < 1:
        raise CliError("--lag-interval must be at least 0.1 s and --lag-history at least 1")
    try:
        jobs = tuple(load_job(path) for path in args.jobs_config)
    except JobsConfigError as e:
        raise CliError(str(e)) from None
    return token, jobs


def _stop(signum: int, frame: Any) -> None:
    # As Ctrl-C: waitress' loop lets KeyboardInterrupt through its handlers (any other exception it logs and
    # swallows) and returns from run() once its threads have finished their requests.
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    token, jobs = _checked(args)
    from waitress import create_server

    from pylog.console.app import ConsoleSettings, create_app
    from pylog.console.cluster_view import ClusterView
    from pylog.console.lag_history import LagHistory, LagSampler

    settings = ConsoleSettings(host=args.host, token=token, allow_offset_reset=args.allow_offset_reset,
                               lag_interval_s=args.lag_interval, jobs=jobs)
    cluster = ClusterView(args)
    history = LagHistory(args.lag_history)
    app = create_app(settings, cluster, history)
    try:
        server = create_server(app, host=args.host, port=args.port, threads=SERVER_THREADS, ident="pylog-console")
    except OSError as e:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    sampler = LagSampler(history, cluster.lag_sample, args.lag_interval)
    sampler.sample_once()         # the port already listens: the first requests wait for this sample, not longer
    sampler.start()
    mode = "offset reset allowed" if args.allow_offset_reset else "read-only"
    print(f"pylog console: http://{_url_host(args.host)}:{server.effective_port}/ ({mode}"
          f"{', token required' if token else ''}; cluster {args.bootstrap_server})", flush=True)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        sampler.stop()
        server.close()
    print("pylog console: stopped", file=sys.stderr, flush=True)
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
