"""The standard AWS variables as the keyword arguments of pyarrow's S3FileSystem, without importing pyarrow.

Shared by the broker's tiered storage (broker/tiered/object_store.py) and the Spark source's direct reads of the
same bucket (sparklog/direct_reads.py), so both read AWS_REGION (or AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3; a plain-HTTP endpoint is
taken from its URL's scheme) the same way.
"""
from __future__ import annotations

from typing import Mapping
from urllib.parse import urlparse

DEFAULT_REGION = "us-east-1"


def s3_filesystem_args(url: str, env: Mapping[str, str]) -> tuple[dict[str, object], str]:
    """(keyword arguments for pyarrow.fs.S3FileSystem, the root 'bucket/prefix') of `s3://bucket/prefix`."""
    parsed = urlparse(url)
    kwargs: dict[str, object] = {"region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION}
    if env.get("AWS_ACCESS_KEY_ID"):
        kwargs.update(access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env.get("AWS_SECRET_ACCESS_KEY", ""))
        if env.get("AWS_SESSION_TOKEN"):
            kwargs["session_token"] = env["AWS_SESSION_TOKEN"]
    endpoint = env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3")
    if endpoint:
        ep = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs.update(endpoint_override=ep.netloc, scheme=ep.scheme)
    return kwargs, f"{parsed.netloc}{parsed.path.rstrip('/')}"
