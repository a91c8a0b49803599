"""Where a Delta table lives: a local directory or an `s3://bucket/prefix`, with the options to reach it.

`TableLocation` is the typed value every connector function takes for a table (a plain string still works:
`of()` turns a path or URI into one, with the storage options of the environment). It owns:
  - the URI's normal form (`file:` dropped, local paths absolute, `s3a://` read as `s3://`) and the schemes
    the sink can write (local and S3-compatible stores; others fail with `UnsupportedLocationError`);
  - the storage options, resolved once from the standard AWS variables (AWS_ENDPOINT_URL,
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, delta-rs's AWS_ALLOW_HTTP, ...)
    overridden by explicit ones (a job's `sink.storage.*`, the sink's `storage.*`), in delta-rs's names;
  - exactly-once on S3: Delta's commit is a put-if-absent of the next version's file, which S3 gives only
    with its conditional writes; unless the user chose delta-rs's unsafe rename, `aws_conditional_put=etag` is
    set, so two writers of one version cannot both succeed (delta-rs 1.x dropped its DynamoDB locking: a table
    naming it is refused rather than left without any safety);
  - the same store for Hadoop's S3A, delta-spark's way to S3 (`hadoop_s3a_conf()`);
  - the same store for delta-rs (`delta()`, `storage_options()`) and for the files pylog reads and writes
    itself (Parquet data files, the log reader, orphan removal) through one pyarrow FileSystem.
Picklable: the sink hands it to its executors inside its options.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Mapping, Union
from urllib.parse import urlparse

from connectors.errors import StoreUnreachableError, UnsupportedLocationError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyarrow import NativeFile
    from pyarrow.fs import FileSystem

# the standard variables a store's options default from (delta-rs's names, lower-cased, are the keys)
ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ALLOW_HTTP", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
            "AWS_CONDITIONAL_PUT", "AWS_S3_LOCKING_PROVIDER", "AWS_S3_ALLOW_UNSAFE_RENAME", "DELTA_DYNAMO_TABLE_NAME")
# the choices of how a commit is made safe on S3; without one, conditional writes are used
COMMIT_SAFETY_KEYS = ("aws_conditional_put", "aws_s3_allow_unsafe_rename")
DEFAULT_REGION = "us-east-1"


def _first(options: Mapping[str, str], *keys: str) -> str | None:
    return next((options[k] for k in keys if options.get(k)), None)


@dataclass(frozen=True)
class TableLocation:
    uri: str                                             # an absolute local path, or s3://bucket/prefix
    options: tuple[tuple[str, str], ...] = field(default=())   # explicit storage options, lower-case keys

    @staticmethod
    def of(ref: TableRef, options: Mapping[str, str] | None = None) -> TableLocation:
        """`ref` as a location: a TableLocation is kept (explicit `options` added over its own), a string
        normalised with `options`."""
        if isinstance(ref, TableLocation):
            if not options:
                return ref
            merged = {**dict(ref.options), **{k.lower(): str(v) for k, v in options.items()}}
            return TableLocation(ref.uri, tuple(sorted(merged.items())))
        text = str(ref)
        if text.startswith("file:"):
            text = urlparse(text).path if text.startswith("file://") else text[len("file:"):]
        scheme = urlparse(text).scheme.lower() if "://" in text else ""
        if scheme in ("s3", "s3a"):
            parsed = urlparse(text)
            if not parsed.netloc:
                raise UnsupportedLocationError(text, "an s3:// table needs a bucket: s3://bucket/path")
            text = f"s3://{parsed.netloc}{parsed.path.rstrip('/')}"
        elif scheme:
            raise UnsupportedLocationError(text, f"pylog-delta writes tables on a local disk or an S3-compatible "
                                           f"store (s3://bucket/path), not {scheme}://")
        else:
            text = str(Path(text).absolute())
        return TableLocation(text, tuple(sorted((k.lower(), str(v)) for k, v in (options or {}).items())))

    def __str__(self) -> str:
        return self.uri

    @property
    def is_local(self) -> bool:
        return not self.uri.startswith("s3://")

    def child(self, name: str) -> TableLocation:
        """The location of `name` inside this one (a table kept beside the data, e.g. `_pylog_runs`)."""
        return TableLocation(f"{self.uri}/{name}", self.options)

    def storage_options(self) -> dict[str, str]:
        """delta-rs's storage options: the environment's AWS variables, then the explicit ones; on S3, conditional
        writes unless another commit safety was chosen. Empty for a local table."""
        if self.is_local:
            return {}
        out = {k.lower(): os.environ[k] for k in ENV_KEYS if os.environ.get(k)}
        out.update(dict(self.options))
        if out.get("aws_s3_locking_provider"):
            # deltalake 1.x logs an error and goes on without it: no commit safety at all
            raise UnsupportedLocationError(self.uri, "delta-rs no longer supports DynamoDB locking "
                                           "(aws_s3_locking_provider); S3's conditional writes, pylog's default, make "
                                           "commits safe: remove aws_s3_locking_provider (AWS_S3_LOCKING_PROVIDER)")
        if not any(out.get(k) for k in COMMIT_SAFETY_KEYS):
            out["aws_conditional_put"] = "etag"
        return out

    def endpoint(self) -> str | None:
        """The S3 endpoint URL the options name (None: AWS's own)."""
        return _first(self.storage_options(), "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")

    def delta(self, version: int | None = None) -> DeltaTable:
        """The table through delta-rs (raises deltalake's TableNotFoundError when there is none)."""
        from deltalake import DeltaTable

        return DeltaTable(self.uri, version=version, storage_options=self.storage_options() or None)

    # --- the files pylog reads and writes itself, through one pyarrow FileSystem ---

    def filesystem(self) -> tuple[FileSystem, str]:
        """(a pyarrow FileSystem for this table's store, the table's root path in it)."""
        from pyarrow import fs

        if self.is_local:
            return fs.LocalFileSystem(), self.uri
        o = self.storage_options()
        endpoint = self.endpoint()
        kwargs: dict[str, object] = {
            "access_key": _first(o, "aws_access_key_id", "access_key_id"),
            "secret_key": _first(o, "aws_secret_access_key", "secret_access_key"),
            "session_token": _first(o, "aws_session_token", "session_token", "token"),
            "region": _first(o, "aws_region", "region", "aws_default_region") or DEFAULT_REGION,
            "force_virtual_addressing": (_first(o, "aws_virtual_hosted_style_request", "virtual_hosted_style_request")
                                         or "false").lower() == "true"}
        if endpoint:
            parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
            kwargs["endpoint_override"] = parsed.netloc
            kwargs["scheme"] = parsed.scheme
        return fs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None}), self.uri[len("s3://"):]

    def hadoop_s3a_conf(self) -> dict[str, str]:
        """The same store for Hadoop's S3A file system (how delta-spark reaches s3:// tables), as settings for this
        table's bucket only: its endpoint (plain HTTP as the URL or aws_allow_http says), credentials (a session
        token through S3A's temporary-credentials provider), region and path-style addressing (delta-rs's default;
        aws_virtual_hosted_style_request=true turns it off). Credentials the options do not name are left to S3A's
        own chain (the AWS variables, the instance's role). Empty for a local table."""
        if self.is_local:
            return {}
        o = self.storage_options()
        bucket = self.uri[len("s3://"):].split("/", 1)[0]
        given = {"endpoint": self.endpoint(),
                 "access.key": _first(o, "aws_access_key_id", "access_key_id"),
                 "secret.key": _first(o, "aws_secret_access_key", "secret_access_key"),
                 "session.token": _first(o, "aws_session_token", "session_token", "token"),
                 "endpoint.region": _first(o, "aws_region", "region", "aws_default_region") or DEFAULT_REGION,
                 "path.style.access": str((_first(o, "aws_virtual_hosted_style_request", "virtual_hosted_style_request")
                                           or "false").lower() != "true").lower()}
        endpoint = given["endpoint"]
        if (_first(o, "aws_allow_http", "allow_http") or "").lower() == "true" or (endpoint or "").startswith("http:"):
            given["connection.ssl.enabled"] = "false"
        if given["session.token"]:
            given["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        return {f"fs.s3a.bucket.{bucket}.{k}": v for k, v in given.items() if v}

    def check_store(self, timeout_s: float = 3.0) -> None:
        """Fail in seconds, in one line, when the table's store cannot be used: its endpoint does not answer, its
        bucket does not exist, or it refuses the credentials (delta-rs would retry for minutes, or print a chain
        of nested errors). Nothing for a local table."""
        if self.is_local:
            return
        import socket

        from pyarrow import fs

        endpoint = self.endpoint()
        settings = "AWS_ENDPOINT_URL (or the job's sink.storage.aws_endpoint_url, the sink's storage.aws_endpoint_url)"
        if endpoint:
            parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            try:
                socket.create_connection((parsed.hostname or "", port), timeout=timeout_s).close()
            except OSError as e:
                raise StoreUnreachableError(self.uri, f"the object store at {endpoint} does not answer "
                                            f"({e.strerror or e}): start it, or correct {settings}") from None
        filesystem, root = self.filesystem()
        bucket = root.split("/", 1)[0]
        try:
            missing = filesystem.get_file_info(bucket).type == fs.FileType.NotFound
            filesystem.get_file_info(fs.FileSelector(f"{root}/_delta_log", allow_not_found=True))
        except OSError as e:
            text = str(e)
            where = endpoint or "AWS S3"
            if "NO_SUCH_BUCKET" in text.upper() or "NoSuchBucket" in text or "does not exist" in text.lower():
                raise StoreUnreachableError(self.uri, f"bucket {bucket} does not exist at {where}: create it (pylog "
                                            "objectstore up --bucket NAME makes one on a local store)") from None
            if any(m in text.upper() for m in ("ACCESS_DENIED", "403", "INVALIDACCESSKEYID", "SIGNATURE")):
                raise StoreUnreachableError(self.uri, f"{where} refused the credentials for bucket {bucket}: "
                                            "correct AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                                            "sink.storage.aws_access_key_id / aws_secret_access_key)") from None
            raise StoreUnreachableError(self.uri, f"cannot list bucket {bucket} at {where}: "
                                        f"{text.splitlines()[0] if text else type(e).__name__}") from None
        if missing:
            raise StoreUnreachableError(self.uri, f"bucket {bucket} does not exist at {endpoint or 'AWS S3'}: create it "
                                        "(pylog objectstore up --bucket NAME makes one on a local store)")


TableRef = Union[str, "os.PathLike[str]", TableLocation]


class TableFiles:
    """File operations on one table's store, with the FileSystem made once (an S3 client is not free)."""

    def __init__(self, location: TableRef) -> None:
        self.location = TableLocation.of(location)
        self.fs, self.root = self.location.filesystem()

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}" if relative else self.root

    def names(self, relative: str) -> list[str]:
        """The names directly inside `relative` (empty when it does not exist)."""
        from pyarrow import fs

        infos = self.fs.get_file_info(fs.FileSelector(self.path(relative), allow_not_found=True))
        return [PurePosixPath(i.path).name for i in infos]

    def exists(self, relative: str) -> bool:
        from pyarrow import fs

        return self.fs.get_file_info(self.path(relative)).type != fs.FileType.NotFound

    def is_file(self, relative: str) -> bool:
        from pyarrow import fs

        return self.fs.get_file_info(self.path(relative)).type == fs.FileType.File

    def read_bytes(self, relative: str) -> bytes:
        """The file's bytes; FileNotFoundError when it is gone."""
        try:
            with self.fs.open_input_stream(self.path(relative)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            raise
        except OSError as e:
            if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                raise FileNotFoundError(self.path(relative)) from e
            raise

    def read_text(self, relative: str) -> str:
        return self.read_bytes(relative).decode()

    def open_output(self, relative: str) -> NativeFile:
        """A new file at `relative` (its directory made on a local disk; stores have none)."""
        if self.location.is_local:
            Path(self.path(relative)).parent.mkdir(parents=True, exist_ok=True)
        return self.fs.open_output_stream(self.path(relative))

    def delete(self, relative: str) -> bool:
        """Delete one file; False when it was not there."""
        try:
            self.fs.delete_file(self.path(relative))
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                return False
            raise

    def files_named(self, prefix: str, skip_dirs: tuple[str, ...] = ("_delta_log",)) -> list[str]:
        """Every file under the table whose name starts with `prefix`, outside `skip_dirs`, as relative paths."""
        from pyarrow import fs

        out = []
        for info in self.fs.get_file_info(fs.FileSelector(self.root, recursive=True, allow_not_found=True)):
            rel = info.path[len(self.root):].lstrip("/")
            parts = rel.split("/")
            if info.type == fs.FileType.File and parts[-1].startswith(prefix) and not set(parts[:-1]) & set(skip_dirs):
                out.append(rel)
        return sorted(out)
