"""Job configuration: conf/jobs/<name>.properties plus --set overrides, with typed accessors.

Owns reading and validating job settings; errors name the key and the expected form. The default
file is conf/jobs/<name>.properties under the working directory, else under the project's own conf/.
Relative `*.path` and `*.location` values in a file are taken relative to that file, so a job runs
the same from any directory; `--set` values are relative to the working directory.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Mapping, overload

from connectors.table_location import TableLocation
from kafka_protocol.properties import parse_assignments, read_properties
from kafka_protocol.errors import InvalidConfigError

DEFAULT_CONF_DIR = Path("conf/jobs")
PROJECT_CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "jobs"
_PATH_SUFFIXES = (".path", ".location")

log = logging.getLogger("pylog.job.config")


class JobConfigError(ValueError):
    pass


class JobConfig:
    def __init__(self, name: str, values: Mapping[str, str]) -> None:
        self.name = name
        self.values = dict(values)

    @classmethod
    def load(cls, name: str, path: str | Path | None = None, overrides: list[str] | None = None) -> "JobConfig":
        values: dict[str, str] = {}
        file = Path(path) if path else cls.default_file(name)
        if path and file is not None and not file.is_file():
            raise JobConfigError(f"job {name}: config file {file} not found" if not file.exists()
                                 else f"job {name}: config file {file} is not a file")
        if file is not None and file.is_file():
            try:
                values.update(read_properties(file))
            except InvalidConfigError as e:
                raise JobConfigError(f"job {name}: {e}") from None
            except OSError as e:
                raise JobConfigError(f"job {name}: cannot read config file {file}: {e.strerror}") from None
            for k, v in values.items():
                if k.endswith(_PATH_SUFFIXES) and v and not Path(v).is_absolute() and "://" not in v:
                    values[k] = str((file.parent / v).resolve())
        try:
            values.update(parse_assignments(overrides or [], "--set"))
        except InvalidConfigError as e:
            raise JobConfigError(f"job {name}: {e}") from None
        cfg = cls(name, values)
        cfg.warn_unknown()
        return cfg

    @staticmethod
    def default_file(name: str) -> Path | None:
        for folder in (DEFAULT_CONF_DIR, PROJECT_CONF_DIR):
            if (folder / f"{name}.properties").is_file():
                return folder / f"{name}.properties"
        return None

    def warn_unknown(self) -> None:
        from jobs.settings import JOB_SETTINGS, unknown_keys

        settings = JOB_SETTINGS.get(self.name)
        if settings:
            for key in unknown_keys(settings, self.values):
                log.warning("job %s: unknown setting %s is ignored", self.name, key)

    @overload
    def get(self, key: str) -> str | None: ...

    @overload
    def get(self, key: str, default: str) -> str: ...

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

    def table(self, key: str = "sink.table.path") -> TableLocation:
        """The Delta table `key` names, with the store options of `sink.storage.*`."""
        prefix = "sink.storage."
        return TableLocation.of(self.require(key), {k[len(prefix):]: v for k, v in self.values.items()
                                                    if k.startswith(prefix) and v})

    def trigger(self) -> dict[str, object]:
        """`trigger` as DataStreamWriter.trigger kwargs: available-now or processing-time=<interval>."""
        v = self.get("trigger", "available-now")
        if v == "available-now":
            return {"availableNow": True}
        m = re.fullmatch(r"processing-time=(.+)", v or "")
        if m:
            return {"processingTime": m.group(1).strip()}
        raise JobConfigError(f"job {self.name}: trigger must be 'available-now' or 'processing-time=<interval>', got {v!r}")
