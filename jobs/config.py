"""Job configuration: conf/jobs/<name>.properties plus --set overrides, with typed accessors.

Owns reading and validating job settings; errors name the key and the expected form.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from broker.config import read_properties
from broker.errors import InvalidConfigError

DEFAULT_CONF_DIR = Path("conf/jobs")


class JobConfigError(ValueError):
    pass


class JobConfig:
    def __init__(self, name: str, values: Mapping[str, str]) -> None:
        self.name = name
        self.values = dict(values)

    @classmethod
    def load(cls, name: str, path: str | Path | None = None, overrides: list[str] | None = None) -> "JobConfig":
        values: dict[str, str] = {}
        file = Path(path) if path else DEFAULT_CONF_DIR / f"{name}.properties"
        if path or file.exists():
            try:
                values.update(read_properties(file))
            except InvalidConfigError as e:
                raise JobConfigError(f"job {name}: {e}") from None
        for item in overrides or []:
            if "=" not in item:
                raise JobConfigError(f"--set expects key=value, got {item!r}")
            k, v = item.split("=", 1)
            values[k.strip()] = v.strip()
        return cls(name, values)

    def get(self, key: str, default: str | None = None) -> str | None:
        v = self.values.get(key)
        return default if v is None or v == "" else v

    def require(self, key: str) -> str:
        v = self.get(key)
        if v is None:
            raise JobConfigError(f"job {self.name}: setting '{key}' is required")
        return v

    def int(self, key: str, default: int | None = None) -> int | None:
        v = self.get(key)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise JobConfigError(f"job {self.name}: setting '{key}' must be an integer, got {v!r}") from None

    def bool(self, key: str, default: bool = False) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if v.lower() not in ("true", "false"):
            raise JobConfigError(f"job {self.name}: setting '{key}' must be true or false, got {v!r}")
        return v.lower() == "true"

    def list(self, key: str) -> list[str]:
        return [x.strip() for x in (self.get(key) or "").split(",") if x.strip()]

    def trigger(self) -> dict[str, object]:
        """`trigger` as DataStreamWriter.trigger kwargs: available-now or processing-time=<interval>."""
        v = self.get("trigger", "available-now")
        if v == "available-now":
            return {"availableNow": True}
        m = re.fullmatch(r"processing-time=(.+)", v or "")
        if m:
            return {"processingTime": m.group(1).strip()}
        raise JobConfigError(f"job {self.name}: trigger must be 'available-now' or 'processing-time=<interval>', got {v!r}")
