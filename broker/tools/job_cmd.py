"""`pylog job NAME [--config FILE] [--set key=value ...]`: run a job from jobs/ with conf/jobs/NAME.properties."""
from __future__ import annotations

import argparse
import importlib
import os

from broker.tools.cli import CliError
from jobs import JOBS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("job", help="run a Spark job (stream_to_delta, batch_load, reprocess)",
                       description="Run a job from jobs/, configured by conf/jobs/NAME.properties and --set overrides.")
    p.add_argument("name", choices=JOBS, help="the job to run")
    p.add_argument("--config", default=None, help="properties file (default conf/jobs/NAME.properties)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from jobs.config import JobConfig, JobConfigError

    os.environ.setdefault("PYLOG_JOB_PGID", str(os.getpgid(0)))  # lets crash tests kill the whole job

    try:
        cfg = JobConfig.load(args.name, args.config, args.set)
        module = importlib.import_module(f"jobs.{args.name}")
        return int(module.run(cfg))
    except JobConfigError as e:
        raise CliError(str(e)) from None
    except Exception as e:  # Spark/Py4J errors: one readable line instead of a JVM stack trace
        if type(e).__module__.startswith(("pyspark", "py4j")):
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith("at ")]
            raise CliError(f"job {args.name} failed: {' '.join(lines[:3])[:1000]}") from None
        raise
