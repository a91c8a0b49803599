"""`pylog objectstore up`: a local S3 server (MinIO) for development, until Ctrl-C.

Prints the standard AWS variables that point delta-rs, pyarrow, boto3 (and so every `pylog job` with an
`s3://` table) at it, as `export` lines to paste into a shell. The binary is the one `make minio` builds
(pylog.launch.object_store); the data stays in --data-dir, or in a temporary directory removed at the end.
"""
from __future__ import annotations

import argparse
import re
import shutil
from typing import Any

from pylog.tools.errors import CliError


def run_up(args: argparse.Namespace) -> int:
    import signal
    import socket
    import tempfile
    import threading
    from pathlib import Path

    from pylog.launch.object_store import LocalObjectStore, ObjectStoreError

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", args.port))
        except OSError:
            raise CliError(f"port {args.port} is in use (another object store?): stop it or give --port") from None
    for name in args.bucket or []:
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", name):
            raise CliError(f"--bucket {name!r} is not a bucket name: 3-63 lower-case letters, digits, dots and hyphens")
    keep = args.data_dir is not None
    root = Path(args.data_dir) if keep else Path(tempfile.mkdtemp(prefix="pylog-objectstore-"))
    store = LocalObjectStore(root / "data", port=args.port, access_key=args.access_key, secret_key=args.secret_key)
    if len(args.secret_key) < 8:
        raise CliError("--secret-key must be at least 8 characters (MinIO refuses shorter ones)")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        store.start()
        buckets = [store.create_bucket(b) for b in args.bucket or ["pylog"]]
        for key, value in store.env().items():
            print(f"export {key}={value}")
        print(f"# buckets: {', '.join(buckets)}; data: {root}" + ("" if keep else " (removed at the end; "
                                                                     "--data-dir keeps it)"))
        print("# Ctrl-C stops the store.", flush=True)
        done.wait()
    except KeyboardInterrupt:
        pass
    except ObjectStoreError as e:
        raise CliError(str(e).splitlines()[0]) from None
    finally:
        store.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    print("object store stopped", flush=True)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("objectstore", help="a local S3-compatible store (MinIO) for development")
    osub = p.add_subparsers(dest="objectstore_command", required=True)
    u = osub.add_parser("up", help="run MinIO on this machine until Ctrl-C and print the AWS variables that reach it")
    u.add_argument("--port", type=int, default=9000, help="its S3 port (default 9000)")
    u.add_argument("--bucket", action="append", metavar="NAME", help="a bucket to create (repeatable; default pylog)")
    u.add_argument("--data-dir", help="where it keeps its objects, kept after it stops (default: a temporary "
                   "directory, removed)")
    u.add_argument("--access-key", default="pylog-dev", help="the root user (AWS_ACCESS_KEY_ID)")
    u.add_argument("--secret-key", default="pylog-dev-secret", help="the root password (AWS_SECRET_ACCESS_KEY, "
                   "at least 8 characters)")
    u.set_defaults(func=run_up)
