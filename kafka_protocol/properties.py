"""Kafka's .properties files and `key=value` settings, read the same way by every part of pylog: the
broker's server.properties and --set, the jobs' conf/jobs/*.properties and --set, the tools'
--property and --command-config. A malformed line or assignment raises InvalidConfigError naming
the file and line, or the flag.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kafka_protocol.errors import InvalidConfigError


def parse_assignments(items: Iterable[str], flag: str, strip_values: bool = True) -> dict[str, str]:
    """`key=value` strings given with `flag` (--set, --config, --property, ...) as a dict, later ones
    winning; a malformed one raises InvalidConfigError naming the flag. The one parser for them all."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigError(f"bad {flag} '{item}': expected key=value")
        out[key.strip()] = value.strip() if strip_values else value
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    """Parse a Java-style .properties file (key=value or key: value, # and ! comments)."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InvalidConfigError(f"Cannot read config file {path}: {e.strerror}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            raise InvalidConfigError(f"{path}:{lineno}: expected key=value, got {s!r}")
    return out
