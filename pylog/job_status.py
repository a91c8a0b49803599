"""`pylog job status [NAME ...]`: the last runs of each job, read from the tables the jobs write.

For each job (by default every job that has a config file, as `pylog job NAME` finds it) it reads the runs
recorded beside its table (jobs.run_history: `<table>/_pylog_runs`) and prints, newest first, when each run
started, how long it took, how it ended (committed, nothing new, done, failed, stopped, running, died), the
offsets it covered and the rows it committed, the table versions it made, and for a failure the one line that
says why. Needs no broker and no Spark. `--json` prints one JSON object per run.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from jobs import JOBS
from jobs.config import JobConfig, JobConfigError
from pylog.tools.errors import CliError
from pylog.tools.text_table import print_table

if TYPE_CHECKING:       # jobs.run_history (deltalake, pyarrow) is imported when the command runs, not by every
    from jobs.run_history import RunSummary    # `pylog` command's parser

HEADER = ["STARTED (UTC)", "RUN", "OUTCOME", "TOOK", "OFFSETS", "ROWS", "VERSIONS", "RANGE"]


def register(jobs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = jobs.add_parser("status", help="the last runs of each job, from its table: offsets, rows, outcome, errors",
                        description="The last runs of each job, read from the Delta table it writes (no broker, "
                                    "no Spark needed).")
    p.add_argument("jobs", nargs="*", metavar="JOB",
                   help=f"jobs to show ({', '.join(JOBS)}); default: each job with a config file")
    p.add_argument("--config", default=None, help="the job's properties file (with one JOB only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting (repeatable)")
    p.add_argument("--last", type=int, default=10, help="runs to show per job (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.set_defaults(func=run)


def _configs(args: argparse.Namespace) -> list[JobConfig]:
    unknown = [j for j in args.jobs if j not in JOBS]
    if unknown:
        raise CliError(f"no job named {', '.join(unknown)}: the jobs are {', '.join(JOBS)}")
    if args.config and len(args.jobs) != 1:
        raise CliError("--config names one job's file: give that one JOB too, e.g. pylog job status batch_load "
                       f"--config {args.config}")
    names = args.jobs or [j for j in JOBS if JobConfig.default_file(j) is not None]
    try:
        return [JobConfig.load(name, args.config, args.set) for name in names]
    except JobConfigError as e:
        raise CliError(str(e)) from None


def _took(s: RunSummary) -> str:
    seconds = s.seconds
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _versions(s: RunSummary) -> str:
    if s.first_version is None:
        return "-"
    return str(s.first_version) if s.first_version == s.last_version else f"{s.first_version}-{s.last_version}"


def _row(s: RunSummary) -> list[str]:
    from jobs.run_history import describe_offsets
    return [s.started.strftime("%Y-%m-%d %H:%M:%S"), s.run_id, s.outcome, _took(s),
            "-" if s.offsets is None else str(s.offsets), "-" if s.rows is None else str(s.rows), _versions(s),
            describe_offsets(s.start_offsets, s.end_offsets)]


def run(args: argparse.Namespace) -> int:
    from jobs.run_history import as_json, read_runs, table_of
    if args.last < 1:
        raise CliError(f"--last must be at least 1, got {args.last}")
    configs = _configs(args)
    if not configs:
        raise CliError("no job has a config file (conf/jobs/NAME.properties): name one, e.g. "
                       "pylog job status batch_load --config FILE")
    for i, cfg in enumerate(configs):
        try:
            table = table_of(cfg)
        except JobConfigError as e:
            raise CliError(str(e)) from None
        runs = read_runs(table, args.last)
        if args.json:
            for s in runs:
                print(as_json(s))
            continue
        if i:
            print()
        where = "checkpoint" if cfg.name == "stream_to_topic" else "table"
        print(f"{cfg.name}: {where} {table}" + ("" if not table.is_local or Path(table.uri).exists() else " (not created yet)"))
        if not runs:
            print("  no runs recorded")
            continue
        print_table(HEADER, [_row(s) for s in runs], gap="  ")
        for s in runs:
            if s.message:
                print(f"  run {s.run_id} {s.outcome}: {s.message}")
    return 0
