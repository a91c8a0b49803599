"""How a job stops on SIGINT and SIGTERM, sent to its process or to its whole process group.

The Spark driver JVM is started with SIGTERM ignored (as pyspark already does for SIGINT), so a
signal to the group (what `timeout`, systemd and Ctrl-C send) reaches only the Python driver, which
stops on its own terms: a stream after the batch in flight, a batch job at once, with nothing
partial committed (every job commits once per batch to Delta). The JVM exits when the driver does
(it watches the driver's pipe), and SIGKILL still kills everything.
"""
from __future__ import annotations

import signal
import subprocess
import threading
from types import FrameType
from typing import Any, Callable, Optional

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class JobInterrupted(BaseException):
    """A stop signal arrived while the job could not stop gracefully (BaseException, like KeyboardInterrupt,
    so that no `except Exception` in library code swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, _frame: Optional[FrameType]) -> None:
    raise JobInterrupted(signum)


def interrupt_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise JobInterrupted in the main thread."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise)


def stop_gracefully_on_signals() -> threading.Event:
    """The first SIGINT/SIGTERM sets the returned event; a second one raises JobInterrupted."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        if stop.is_set():
            _raise(signum, frame)
        stop.set()

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    return stop


def shield_spark_jvm() -> None:
    """Make pyspark start its JVM with SIGTERM ignored (it already ignores SIGINT). Call before the session."""
    from pyspark import java_gateway

    if getattr(java_gateway.Popen, "_pylog_shielded", False):
        return

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        inner: Optional[Callable[[], None]] = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return subprocess.Popen(*args, **kwargs)

    popen._pylog_shielded = True  # type: ignore[attr-defined]
    java_gateway.Popen = popen  # type: ignore[assignment]
