"""Errors of the jobs, and the one place a failure is turned into the line a user reads.

Spark wraps an error raised in a Python data source or sink several times (Python traceback inside
a JVM exception inside a Py4J error). `root_cause` digs out the innermost Python exception line, so
the summary says "DataLossError: Topic events was re-created ..." rather than a stack frame.
"""
from __future__ import annotations

import re

# Wrappers that say where an error travelled, not what it was.
_WRAPPERS = {"PythonException", "Py4JJavaError", "StreamingQueryException", "SparkException", "Py4JError",
             "PySparkRuntimeError", "CapturedException", "UnknownException", "QueryExecutionException"}
_ERROR_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit)))(?::\s*(.*))?$")
_MAX = 1500


class JobFailed(RuntimeError):
    """A job ended in error; the message is already the root cause, ready for one summary line."""


def _traceback_finals(lines: list[str]) -> list[str]:
    """The exception line ending each Python traceback in `lines`, in order."""
    out = []
    for i, line in enumerate(lines):
        if line.strip().startswith("Traceback (most recent call last)"):
            for follow in lines[i + 1:]:
                if follow and not follow.startswith((" ", "\t")):
                    out.append(follow.strip())
                    break
    return out


def root_cause(exc: BaseException) -> str:
    """One readable line (sometimes a few sentences) naming what went wrong, without stack frames."""
    text = str(exc)
    lines = text.splitlines()
    for final in _traceback_finals(lines):
        m = _ERROR_LINE.match(final)
        if m and m.group(2) not in _WRAPPERS:
            # the rest of the message may continue on the following lines until the JVM part
            idx = lines.index(final) if final in lines else -1
            extra = []
            for follow in lines[idx + 1:] if idx >= 0 else []:
                if not follow.strip() or follow.startswith(("\tat ", "  ", "JVM stacktrace")) or "Exception" in follow:
                    break
                extra.append(follow.strip())
            return " ".join([f"{m.group(2)}: {m.group(3) or ''}".strip()] + extra)[:_MAX]
    meaningful = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith(("at ", "File ", "Traceback"))
                  and not ln.startswith((" ", "\t"))]
    first = " ".join(meaningful[:3]) if meaningful else type(exc).__name__
    return first[:_MAX]
