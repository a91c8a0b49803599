"""The object store tiered segments go to: `remote.log.storage.url`, an `s3://bucket/prefix` or a local directory.

Blocking calls, made from the remote log manager's worker threads (never the event loop), through pyarrow's
file systems: S3 with the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION; a plain-HTTP endpoint is taken from its URL), or the local file system (tests,
a mounted volume). Keys are '/'-separated below the prefix. pyarrow is imported only when tiered storage is on.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_protocol.s3_settings import s3_filesystem_args

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

COPY_CHUNK = 8 * 1024 * 1024


class RemoteStorageError(OSError):
    """The object store failed a call (unreachable, refused, missing bucket); the message names the store and
    the object. `condition` says the same without the object or the store's request id: what a log line that
    must not repeat for every object shows."""

    def __init__(self, message: str, condition: str) -> None:
        super().__init__(message)
        self.condition = condition


_REQUEST_ID = re.compile(r"\s*\(Request ID: [^)]*\)")


def _first_line(e: OSError) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def store_answer(e: OSError) -> str:
    """The store's answer in an error from pyarrow's S3 client, without the object's key or the request id:
    "AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: The specified bucket does not exist"."""
    text = _first_line(e)
    if "AWS Error " in text:
        text = "AWS Error " + text.rsplit("AWS Error ", 1)[1]
    return _REQUEST_ID.sub("", text)


def _s3(url: str) -> tuple[FileSystem, str]:
    from pyarrow import fs

    kwargs, root = s3_filesystem_args(url, os.environ)
    kwargs["retry_strategy"] = fs.AwsStandardS3RetryStrategy(max_attempts=3)
    return fs.S3FileSystem(**kwargs), root


class ObjectStore:
    def __init__(self, url: str) -> None:
        from pyarrow import fs

        self.url = url.rstrip("/")
        if url.startswith("s3://"):
            self.fs, self.root = _s3(url)
        elif "://" in url and not url.startswith("file://"):
            raise ValueError(f"remote.log.storage.url must be s3://bucket/prefix or a local directory, got {url!r}")
        else:
            self.fs = fs.LocalFileSystem()
            self.root = str(Path(url.removeprefix("file://")).absolute())
            Path(self.root).mkdir(parents=True, exist_ok=True)
        self.local = isinstance(self.fs, fs.LocalFileSystem)

    def __repr__(self) -> str:
        return f"ObjectStore({self.url})"

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def _output(self, key: str) -> Any:
        """A stream writing object `key` (in a local directory, its folder made first: S3 has no folders)."""
        path = self._path(key)
        if self.local:
            self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        return self.fs.open_output_stream(path)

    def _fail(self, what: str, key: str, e: OSError) -> RemoteStorageError:
        return RemoteStorageError(f"{what} {self.url}/{key}: {_first_line(e)}",
                                  f"{what} in {self.url}: {store_answer(e)}")

    def check(self) -> None:
        """The store answers: the prefix can be listed (raises RemoteStorageError)."""
        from pyarrow import fs

        try:
            self.fs.get_file_info(fs.FileSelector(self.root, allow_not_found=True))
        except OSError as e:
            raise self._fail("cannot list", "", e) from None

    def put_file(self, key: str, path: Path) -> None:
        try:
            with open(path, "rb") as src, self._output(key) as dst:
                while chunk := src.read(COPY_CHUNK):
                    dst.write(chunk)
        except OSError as e:
            raise self._fail("cannot upload", key, e) from None

    def put_fd(self, key: str, fd: int, size: int) -> None:
        """The first `size` bytes of open file `fd` (read with pread: its position is not moved)."""
        try:
            with self._output(key) as dst:
                pos = 0
                while pos < size:
                    chunk = os.pread(fd, min(COPY_CHUNK, size - pos), pos)
                    if not chunk:
                        break
                    dst.write(chunk)
                    pos += len(chunk)
        except OSError as e:
            raise self._fail("cannot upload", key, e) from None

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            with self._output(key) as dst:
                dst.write(data)
        except OSError as e:
            raise self._fail("cannot upload", key, e) from None

    def get_bytes(self, key: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._path(key)) as f:
                return bytes(f.read())
        except OSError as e:
            raise self._fail("cannot read", key, e) from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with self.fs.open_input_file(self._path(key)) as f:
                return bytes(f.read_at(length, start))
        except OSError as e:
            raise self._fail("cannot read", key, e) from None

    def names(self, folder: str) -> list[str]:
        """The object names directly in `folder` ([] when there are none)."""
        return list(self.listing(folder))

    def listing(self, folder: str) -> dict[str, float | None]:
        """The objects directly in `folder`: name -> last modified (seconds since the epoch; None if unknown)."""
        from pyarrow import fs

        try:
            infos = self.fs.get_file_info(fs.FileSelector(self._path(folder), allow_not_found=True))
        except OSError as e:
            raise self._fail("cannot list", folder, e) from None
        return {i.base_name: (i.mtime.timestamp() if i.mtime is not None else None)
                for i in infos if i.type == fs.FileType.File}

    def delete(self, key: str) -> None:
        try:
            self.fs.delete_file(self._path(key))
        except FileNotFoundError:
            pass
        except OSError as e:
            if "not found" not in str(e).lower() and "does not exist" not in str(e).lower():
                raise self._fail("cannot delete", key, e) from None
