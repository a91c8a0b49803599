"""A local S3 server for development and tests: MinIO, built from its Go module by `make minio`.

Owns one MinIO process: its data directory, address and root credentials, readiness (MinIO's
`/minio/health/live`), buckets, and stop, kill and restart on the same port for the fault tests. `env()` is
what the standard AWS variables must say to reach it (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, and delta-rs's AWS_ALLOW_HTTP for its plain-HTTP endpoint), as boto3,
pyarrow and delta-rs read them. Used by `pylog objectstore up` and by the tests; a deployment points those
variables (or a job's `sink.storage.*` settings) at its own store instead.

The binary comes from, in order: $PYLOG_MINIO, the Makefile's cache (`.cache/minio/bin/minio`), the PATH.
`make test` builds it in the background while the suite starts; `wait_for_build` waits for that build.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "minio"
REGION = "us-east-1"


class ObjectStoreError(RuntimeError):
    """MinIO is missing, did not build, or did not start; the message names the cause and the fix."""


def minio_binary() -> Path | None:
    """Where the MinIO binary is, or None."""
    explicit = os.environ.get("PYLOG_MINIO")
    if explicit:
        return Path(explicit)
    cached = CACHE / "bin" / "minio"
    if cached.exists():
        return cached
    found = shutil.which("minio")
    return Path(found) if found else None


def wait_for_build(timeout_s: float = 900.0) -> Path:
    """The MinIO binary, once a background build (`make minio-background`) has made it; raises ObjectStoreError
    when there is no binary and no build running, or the build failed or took longer than `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    log, rc = CACHE / "build.log", CACHE / "build.rc"
    while True:
        binary = minio_binary()
        if binary is not None and binary.exists() and (not log.exists() or rc.exists()):
            return binary
        if rc.exists() and rc.read_text().strip() != "0":
            raise ObjectStoreError(f"the MinIO build failed (exit {rc.read_text().strip()}); its log ends:\n"
                                   + log.read_text(errors="replace")[-1500:])
        if not log.exists():
            raise ObjectStoreError("MinIO is not built: run `make minio` (builds it from the Go module proxy, about "
                                   "2.5 minutes) or set PYLOG_MINIO to a minio binary")
        if time.monotonic() > deadline:
            raise ObjectStoreError(f"the MinIO build ({log}) has not finished after {timeout_s:.0f} s")
        time.sleep(1.0)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalObjectStore:
    def __init__(self, data_dir: Path, port: int | None = None, host: str = "127.0.0.1",
                 access_key: str = "pylog-dev", secret_key: str = "pylog-dev-secret") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or _free_port(host)
        self.access_key = access_key
        self.secret_key = secret_key   # MinIO wants at least 8 characters
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}-minio.log"

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point boto3, pyarrow and delta-rs at this store."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}

    def storage_options(self) -> dict[str, str]:
        """The same as explicit storage options (`sink.storage.*`, the sink's `storage.*`)."""
        return {k.lower(): v for k, v in self.env().items()}

    def start(self, timeout_s: float = 60.0) -> LocalObjectStore:
        binary = wait_for_build()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        console = _free_port(self.host)
        cmd = [str(binary), "server", str(self.data_dir), "--address", f"{self.host}:{self.port}",
               "--console-address", f"{self.host}:{console}", "--quiet"]
        env = {**os.environ, "MINIO_ROOT_USER": self.access_key, "MINIO_ROOT_PASSWORD": self.secret_key,
               "MINIO_BROWSER": "off", "MINIO_UPDATE": "off", "MINIO_REGION": REGION}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.endpoint}/minio/health/live", timeout=1.0) as r:
                    if r.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        tail = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        self.kill()
        raise ObjectStoreError(f"MinIO did not serve on {self.endpoint} within {timeout_s:.0f} s ({' '.join(cmd)}); "
                               f"its log ends:\n{tail}")

    def create_bucket(self, name: str) -> str:
        """Create bucket `name` (no error when it exists); returns `s3://name`."""
        from pyarrow import fs

        store = fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, region=REGION,
                                endpoint_override=f"{self.host}:{self.port}", scheme="http",
                                allow_bucket_creation=True)
        store.create_dir(name)
        return f"s3://{name}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; then wait for it to exit."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the store vanishes mid-request (the fault tests)."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> LocalObjectStore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
