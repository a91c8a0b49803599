"""How a job stops on SIGINT and SIGTERM, sent to its process or to its whole process group.

The Spark driver JVM is started with SIGTERM ignored (as pyspark already does for SIGINT), so a
signal to the group (what `timeout`, systemd and Ctrl-C send) reaches only the Python driver, which
stops on its own terms: a stream after the batch in flight, a batch job at once, with nothing
partial committed (every job commits once per batch to Delta). The JVM exits when the driver does
(it watches the driver's pipe), and SIGKILL still kills everything.
"""
from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator, Optional

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class JobInterrupted(BaseException):
    """A stop signal arrived before Spark was running (BaseException, like KeyboardInterrupt, so that no
    `except Exception` in library code swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class JobStopper:
    """What SIGINT and SIGTERM do to a job, in one place.

    Before Spark runs, a signal raises JobInterrupted. Once a session is attached, a signal never
    raises inside a Py4J call (that breaks the connection and prints pages of errors): it records the
    signal and cancels the running Spark jobs from another thread, so the blocking call fails on its
    own and the job ends with one line. With `graceful` (a stream), the first signal only sets
    `requested`, so the stream can stop after the batch in flight; a second one cancels.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.requested = threading.Event()
        self.graceful = False
        self._spark: Any = None

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    @contextlib.contextmanager
    def starting_spark(self) -> Iterator[None]:
        """Hold SIGINT/SIGTERM while the session starts (SparkContext installs a SIGINT handler that makes
        re-entrant Py4J calls); a signal that came meanwhile is handled right after, as JobInterrupted."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            yield
        finally:
            self.install()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)   # a held signal is delivered here

    def attach(self, spark: Any) -> None:
        """From now on signals cancel this session's Spark jobs instead of raising."""
        self._spark = spark

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "a signal"

    def _on_signal(self, signum: int, _frame: Optional[FrameType]) -> None:
        first = not self.requested.is_set()
        self.signum = self.signum or signum
        self.requested.set()
        if self._spark is None:
            raise JobInterrupted(signum)
        if first and self.graceful:
            return
        threading.Thread(target=self._cancel, name="pylog-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self._spark.sparkContext.cancelAllJobs()
        except Exception:  # noqa: BLE001 - the session may already be gone
            pass


STOPPER = JobStopper()


def shield_spark_jvm(output: Optional[Path] = None) -> None:
    """Make pyspark start its JVM with SIGTERM ignored (it already ignores SIGINT) and, with `output`, its
    stdout and stderr appended to that file: also those of Spark's Python workers, whose tracebacks when a
    stop cancels their tasks (a broken pipe, an EOFError per task) are noise on a terminal. Call before the
    session is built."""
    from pyspark import java_gateway

    spawn: Callable[..., "subprocess.Popen[bytes]"] = getattr(java_gateway.Popen, "_pylog_inner", java_gateway.Popen)

    def popen(*args: Any, **kwargs: Any) -> "subprocess.Popen[bytes]":
        inner: Optional[Callable[[], None]] = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)   # held while the session starts

        kwargs["preexec_fn"] = preexec
        if output is None:
            return spawn(*args, **kwargs)
        with open(output, "ab") as sink:
            kwargs.setdefault("stdout", sink)
            kwargs.setdefault("stderr", sink)
            return spawn(*args, **kwargs)

    setattr(popen, "_pylog_inner", spawn)
    setattr(java_gateway, "Popen", popen)
