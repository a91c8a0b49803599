"""`pylog job NAME [--config FILE] [--set key=value ...]`: run a job from jobs/ with conf/jobs/NAME.properties.

`pylog job NAME --help` lists that job's settings with defaults and meaning (jobs.settings). A job
that fails ends with one line naming the root cause (jobs.errors.root_cause), never a stack trace.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
from typing import TYPE_CHECKING

from pylog import job_status
from pylog.tools.errors import CliError
from jobs import JOBS
from jobs.settings import JOB_SETTINGS, describe

if TYPE_CHECKING:
    from jobs.signals import JobStopper

_SUMMARIES = {
    "stream_to_delta": "topics -> Delta, exactly once, as a Spark stream (catch up, or run continuously)",
    "stream_to_topic": "topic -> Spark SQL transformation -> topic, exactly once (Kafka transactions)",
    "batch_load": "a cron-able incremental load: everything new since the last run, in one Delta commit",
    "reprocess": "rebuild a table from rewound offsets (earliest, a timestamp, given offsets or a table version's)",
    "maintain": "Delta maintenance with delta-spark: compaction, vacuum, checkpoint, and a report of each app's offsets",
}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("job", help="run a Spark job (stream_to_delta, stream_to_topic, batch_load, reprocess, maintain), "
                                   "or show the last runs (status)",
                       description="Run a job from jobs/, configured by conf/jobs/NAME.properties and --set "
                                   "overrides. `pylog job NAME --help` lists the job's settings.")
    jobs = p.add_subparsers(dest="name", metavar="NAME", required=True)
    for name in JOBS:
        j = jobs.add_parser(name, help=_SUMMARIES[name], description=_SUMMARIES[name],
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog=f"settings (conf/jobs/{name}.properties, or --set key=value):\n"
                                   + describe(JOB_SETTINGS[name]))
        j.add_argument("--config", default=None, help=f"properties file (default conf/jobs/{name}.properties)")
        j.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a setting (repeatable)")
        j.set_defaults(func=run)
    job_status.register(jobs)


def run(args: argparse.Namespace) -> int:
    from jobs.signals import STOP_SIGNALS, STOPPER

    os.environ.setdefault("PYLOG_JOB_PGID", str(os.getpgid(0)))  # lets crash tests kill the whole job

    STOPPER.install()
    try:
        return _run(args, STOPPER)
    finally:
        # The job is over: a signal from now on must not turn a finished run into "killed by SIGTERM"
        # (interpreter shutdown restores default handlers for Python ones, but keeps SIG_IGN).
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def _run(args: argparse.Namespace, stopper: "JobStopper") -> int:
    from jobs.config import JobConfig, JobConfigError
    from jobs.errors import JobFailed, root_cause
    from jobs.signals import JobInterrupted

    try:
        cfg = JobConfig.load(args.name, args.config, args.set)
        module = importlib.import_module(f"jobs.{args.name}")
        rc = int(module.run(cfg))
    except JobInterrupted as e:
        return _stopped(args.name, e.signum, str(e))
    except (JobConfigError, JobFailed) as e:
        if stopper.signum is not None:
            return _stopped(args.name, stopper.signum, stopper.signal_name)
        raise CliError(f"job {args.name} failed: {e}{_log_hint()}" if isinstance(e, JobFailed) else str(e)) from None
    except Exception as e:  # Spark, Py4J, Delta and Kafka errors: one line naming the root cause
        if stopper.signum is not None:   # a Spark job cancelled because of a signal
            return _stopped(args.name, stopper.signum, stopper.signal_name)
        logging.getLogger("pylog.job").debug("job %s failed", args.name, exc_info=True)   # --log-level DEBUG
        raise CliError(f"job {args.name} failed: {root_cause(e)}{_log_hint()}") from None
    if stopper.requested.is_set() and not stopper.graceful:
        logging.getLogger("pylog.job").info("job %s had finished its work when %s arrived", args.name,
                                            stopper.signal_name)
    return rc


def _log_hint() -> str:
    """' (Spark's log: FILE)' when the job built a Spark session, whose log went to that file."""
    from jobs.spark_session import current_log_file

    f = current_log_file()
    return f" (Spark's log: {f})" if f is not None and f.exists() else ""


def _stopped(name: str, signum: int, how: str) -> int:
    logging.getLogger("py4j").setLevel(logging.CRITICAL)   # connections closing under a stopping driver
    logging.getLogger("pylog.job").warning(
        "job %s stopped by %s: nothing partial was committed; the next run picks up from the table", name, how)
    return 128 + int(signum)
