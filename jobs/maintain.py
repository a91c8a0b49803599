"""`pylog job maintain`: Delta table maintenance with delta-spark, Spark's own Delta engine.

Steps, each on by default and each retried when another writer's commit conflicts with it:
  1. compaction: OPTIMIZE (ZORDER BY maintain.zorder.by when set);
  2. VACUUM with the table's delta.deletedFileRetentionDuration (7 days unless the table says otherwise),
     or RETAIN maintain.vacuum.retention.hours when set (whole hours: Delta rounds to them). Below the
     table's retention Delta refuses unless spark.databricks.delta.retentionDurationCheck.enabled=false.
     Beside a running writer the retention must exceed the longest time from a batch's files being
     written to their commit: VACUUM deletes files no commit names yet, and the writer's commit would
     then name missing files (connectors.errors.MissingFilesError refuses that commit);
  3. a checkpoint of the latest version (delta-spark's cached snapshot refreshed first: pylog commits
     through delta-rs), with the log cleanup the table's delta.logRetentionDuration allows.
Then a report: version, file count and size before and after, and the offsets each app keeps in the
table (connectors AppState, read from the log after the checkpoint and cleanup). An app whose offsets
disappeared, or went back within the same generation, fails the job: that would make it re-read
(duplicate) records. The report is logged, and written as JSON to maintain.report.path when set.

Offsets survive because pylog keeps them, and its batch markers, as Delta txn actions: every
checkpoint carries each app id's latest txn, so the commits before it can go.
"""
from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from connectors.delta_commit import app_state, open_table
from jobs.sink_engine import check_s3_engine
from connectors.offset_manager import OffsetManager
from connectors.offset_txns import AppState
from connectors.table_location import TableLocation, TableRef
from jobs.config import JobConfig, JobConfigError
from jobs.errors import JobFailed, root_cause
from jobs.spark_session import build_session
from jobs.run_history import DONE, recorded
from sparklog.offsets import format_tp, to_json

log = logging.getLogger("pylog.job.maintain")

T = TypeVar("T")

# delta-spark's conflicts with another writer's commit (io.delta.exceptions.*, and their error classes)
_CONFLICT = re.compile(r"Concurrent\w*Exception|MetadataChangedException|ProtocolChangedException|"
                       r"DELTA_CONCURRENT_\w+|DELTA_METADATA_CHANGED|DELTA_PROTOCOL_CHANGED")


def is_conflict(error: BaseException) -> bool:
    """Whether `error` is delta-spark's report of a conflicting concurrent commit (worth a retry)."""
    return bool(_CONFLICT.search(str(error)))


def retried(what: str, step: Callable[[], T], attempts: int, backoff_s: float = 1.0) -> T:
    """`step()`, run again (up to `attempts` times in all) while it fails on a concurrent commit."""
    for attempt in range(1, attempts + 1):
        try:
            return step()
        except Exception as e:  # noqa: BLE001 - Py4J and Spark wrap delta-spark's exceptions
            if not is_conflict(e):
                raise
            if attempt == attempts:
                raise JobFailed(f"{what}: another writer's commits kept conflicting; gave up after {attempts} "
                                f"attempts: {root_cause(e)}") from None
            log.warning("%s: another writer committed a conflicting change (attempt %d of %d); trying again",
                        what, attempt, attempts)
            time.sleep(backoff_s * attempt)
    raise AssertionError("unreachable")


def _ident(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def table_facts(spark: Any, path: str) -> dict[str, int]:
    """{"version", "files", "bytes"} of the table's latest version, as delta-spark sees it."""
    detail = spark.sql(f"DESCRIBE DETAIL {_ident(path)}").collect()[0]
    version = int(spark.sql(f"DESCRIBE HISTORY {_ident(path)} LIMIT 1").collect()[0]["version"])
    return {"version": version, "files": int(detail["numFiles"]), "bytes": int(detail["sizeInBytes"])}


def app_states(path: TableRef) -> dict[str, AppState]:
    """Every app with offsets in the table, and what it keeps there (from one read of the log per app)."""
    return {app: app_state(path, app) for app in OffsetManager(path, "").apps()}


def _describe(state: AppState) -> dict[str, Any]:
    return {"offsets": to_json(state.offsets), "generation": state.generation, "last_batch": state.last_batch,
            "topic_ids": state.topic_ids}


def lost_offsets(before: dict[str, AppState], after: dict[str, AppState]) -> list[str]:
    """What maintenance must never do: an app's offsets gone, or lower within the same generation."""
    problems = []
    for app, b in sorted(before.items()):
        a = after.get(app)
        if a is None or not a.offsets:
            problems.append(f"app {app} kept offsets {to_json(b.offsets)} before and none after")
        elif a.generation == b.generation:
            back = [f"{format_tp(tp)} {o} -> {a.offsets.get(tp)}" for tp, o in sorted(b.offsets.items())
                    if a.offsets.get(tp, -1) < o]
            if back:
                problems.append(f"app {app} (generation {b.generation}): offsets went back: {', '.join(back)}")
    return problems


def optimize(spark: Any, path: str, zorder_by: list[str]) -> dict[str, int]:
    zorder = f" ZORDER BY ({', '.join('`' + c.replace('`', '``') + '`' for c in zorder_by)})" if zorder_by else ""
    metrics = spark.sql(f"OPTIMIZE {_ident(path)}{zorder}").collect()[0]["metrics"]
    return {"files_added": int(metrics["numFilesAdded"]), "files_removed": int(metrics["numFilesRemoved"])}


# delta-spark 4 ignores a RETAIN other than 0 hours, with only a warning in Spark's log, unless this internal
# setting (default true) is off; the job's setting is what the user asked for, so it is honoured
IGNORE_RETAIN = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
TABLE_RETENTION = "delta.deletedFileRetentionDuration"


def vacuum(spark: Any, path: str, retention_hours: int | None) -> str:
    """VACUUM keeping `retention_hours` of history, or the table's own retention when None; the retention
    applied, in words."""
    if retention_hours is None:
        spark.sql(f"VACUUM {_ident(path)}").collect()
        configured = spark.sql(f"SHOW TBLPROPERTIES {_ident(path)} ('{TABLE_RETENTION}')").collect()
        value = configured[0]["value"] if configured else ""
        shown = value if value and "does not have property" not in value else "interval 1 weeks, Delta's default"
        return f"the table's {TABLE_RETENTION} ({shown})"
    spark.conf.set(IGNORE_RETAIN, "false")
    spark.sql(f"VACUUM {_ident(path)} RETAIN {retention_hours} HOURS").collect()
    return f"{retention_hours} hours (maintain.vacuum.retention.hours)"


def retention_setting(cfg: JobConfig) -> int | None:
    """maintain.vacuum.retention.hours as whole hours, or None when unset (the table's retention applies)."""
    raw = cfg.get("maintain.vacuum.retention.hours")
    if raw is None:
        return None
    try:
        hours = float(raw)
    except ValueError:
        hours = -1.0
    if hours < 0 or hours != int(hours):
        raise JobConfigError(f"job maintain: maintain.vacuum.retention.hours must be a whole number of hours (Delta "
                             f"rounds to hours, so 0.4 would delete every unreferenced file), got {raw!r}")
    return int(hours)


def checkpoint(spark: Any, path: str, clean_up_log: bool) -> int:
    """A delta-spark checkpoint of the latest version (and the log cleanup the table allows); its version."""
    jvm = spark._jvm
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = delta_log.update(False, none, none)   # the cache has not seen delta-rs' commits
    if clean_up_log:
        delta_log.checkpointAndCleanUpDeltaLog(snapshot, none)
    else:
        delta_log.checkpoint(snapshot, none)
    return int(snapshot.version())


def run(cfg: JobConfig) -> int:
    check_s3_engine(cfg, "job maintain (delta-spark's OPTIMIZE, VACUUM and checkpoint)")
    table = cfg.table()
    if open_table(table) is None:
        raise JobConfigError(f"job maintain: there is no Delta table at {table}")
    with recorded(cfg, cfg.name, DONE):
        return _maintain(cfg, table)


def _maintain(cfg: JobConfig, table: TableLocation) -> int:
    path = table.uri                    # delta-spark's name of the table; pylog reads it with its store options
    attempts = cfg.int("maintain.max.attempts", 5) or 1
    retention_hours = retention_setting(cfg)

    spark = build_session(cfg, f"pylog maintain {path}", delta_spark=True)
    report: dict[str, Any] = {"table": path, "steps": {}}
    apps_before = app_states(table)
    report["before"] = table_facts(spark, path)
    log.info("maintaining %s: version %d, %d files, %d bytes, apps %s", path, report["before"]["version"],
             report["before"]["files"], report["before"]["bytes"], ", ".join(apps_before) or "none")
    if cfg.bool("maintain.optimize", True):
        zorder = cfg.list("maintain.zorder.by")
        report["steps"]["optimize"] = retried("OPTIMIZE", lambda: optimize(spark, path, zorder), attempts)
        log.info("OPTIMIZE%s: %s", f" ZORDER BY {zorder}" if zorder else "", report["steps"]["optimize"])
    if cfg.bool("maintain.vacuum", True):
        applied = retried("VACUUM", lambda: vacuum(spark, path, retention_hours), attempts)
        report["steps"]["vacuum"] = {"retention_hours": retention_hours, "retention": applied}
        log.info("VACUUM done, keeping the files of the last %s", applied)
    if cfg.bool("maintain.checkpoint", True):
        cleanup = cfg.bool("maintain.log.cleanup", True)
        version = retried("checkpoint", lambda: checkpoint(spark, path, cleanup), attempts)
        report["steps"]["checkpoint"] = {"version": version, "log_cleanup": cleanup}
        log.info("checkpoint at version %d%s", version, " with log cleanup" if cleanup else "")
    report["after"] = table_facts(spark, path)
    apps_after = app_states(table)
    report["apps"] = {app: _describe(s) for app, s in apps_after.items()}
    log.info("maintained %s: version %d, %d files, %d bytes (before: %d files, %d bytes)", path,
             report["after"]["version"], report["after"]["files"], report["after"]["bytes"],
             report["before"]["files"], report["before"]["bytes"])
    for app, s in apps_after.items():
        log.info("app %s: offsets %s, generation %s, last batch %s", app, to_json(s.offsets), s.generation,
                 s.last_batch)
    problems = lost_offsets(apps_before, apps_after)
    report["problems"] = problems
    if cfg.get("maintain.report.path"):
        Path(cfg.require("maintain.report.path")).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if problems:
        raise JobFailed(f"after maintaining {path}: " + "; ".join(problems))
    return 0
