"""Each setting declared once: its type, default, limits, scope, topic-level name, synonyms and doc.

Kafka declares a setting with one `ConfigDef.define(name, type, default, validator, importance, doc)`;
`ConfigDef` here does the same for the broker (broker.config builds its `CONFIG` with it). From that
one declaration come the parsing of server.properties and --set, the range checks (the same limit
for a broker setting and the topic config it defaults), which settings may change at run time (KIP-226:
every topic default, and those declared `dynamic`), the topic configs and their broker synonyms that
DescribeConfigs reports, and the settings page docs/SETTINGS.md (`settings_page`). Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

Parser = Callable[[Any], Any]


@dataclass(frozen=True)
class ConfigKey:
    """One setting. `topic` names the topic config it is the default of (Kafka's topic-level synonym);
    `synonyms` are the older settings it falls back to, in order; a broker setting with no `name` is a
    topic config with no broker setting behind it (`topic_only`)."""

    name: str
    parse: Parser
    default: Any
    doc: str
    type_name: str
    at_least: int | float | None = None
    at_most: int | float | None = None
    topic: str | None = None
    synonyms: tuple[str, ...] = ()
    dynamic: bool = False

    @property
    def sensitive(self) -> bool:
        """A password: DescribeConfigs reports it as null, as Kafka does."""
        return self.type_name == "password"

    @property
    def scope(self) -> str:
        """Kafka's words for when a setting may change: read-only, or per-broker and cluster-wide."""
        return "dynamic (per broker and cluster-wide)" if self.dynamic or self.topic is not None else "static"

    def problem(self, value: Any) -> str | None:
        """Why `value` (parsed) is out of range, in Kafka's words, or None."""
        if value is None or isinstance(value, (str, bool)):
            return None
        if self.at_least is not None and value < self.at_least:
            return f"must be at least {self.at_least}"
        if self.at_most is not None and value > self.at_most:
            return f"must be at most {self.at_most}"
        return None


class ConfigDef:
    """The table of settings, filled by `define` (broker settings) and `define_topic` (topic configs with
    no broker setting behind them)."""

    def __init__(self) -> None:
        self.keys: dict[str, ConfigKey] = {}
        self.topic_only: dict[str, ConfigKey] = {}

    def define(self, name: str, type_name: str, parse: Parser, default: Any, doc: str, *,
               at_least: int | float | None = None, at_most: int | float | None = None, topic: str | None = None,
               synonyms: tuple[str, ...] = (), dynamic: bool = False) -> "ConfigDef":
        if name in self.keys:
            raise ValueError(f"setting {name} is defined twice")
        self.keys[name] = ConfigKey(name, parse, default, doc, type_name, at_least, at_most, topic, synonyms, dynamic)
        return self

    def define_topic(self, topic: str, type_name: str, parse: Parser, default: Any, doc: str) -> "ConfigDef":
        if topic in self.topic_only or topic in self.topic_to_broker():
            raise ValueError(f"topic config {topic} is defined twice")
        self.topic_only[topic] = ConfigKey("", parse, default, doc, type_name, topic=topic)
        return self

    def __getitem__(self, name: str) -> ConfigKey:
        return self.keys[name]

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self.keys.values())

    def topic_to_broker(self) -> dict[str, str]:
        """{topic config: the broker setting it defaults from}."""
        return {k.topic: k.name for k in self.keys.values() if k.topic is not None}

    def topic_key(self, topic: str) -> ConfigKey | None:
        """The declaration behind topic config `topic` (its broker setting's, or its own), or None."""
        broker = self.topic_to_broker().get(topic)
        return self.keys[broker] if broker is not None else self.topic_only.get(topic)

    def dynamic_keys(self) -> frozenset[str]:
        return frozenset(k.name for k in self.keys.values() if k.scope != "static")

    def synonyms(self) -> dict[str, tuple[str, ...]]:
        """{setting: (itself, then the older settings it falls back to)} for settings that have any."""
        return {k.name: (k.name, *k.synonyms) for k in self.keys.values() if k.synonyms}


def render(value: Any) -> str:
    """A default as Kafka's docs print it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def settings_page(config: ConfigDef, title: str, intro: str) -> str:
    """The Markdown page of every setting (docs/SETTINGS.md is this, for the broker's CONFIG)."""
    lines = [f"# {title}", "", intro, "", "| setting | type | default | valid values | scope | topic config | meaning |",
             "|---|---|---|---|---|---|---|"]

    def valid(k: ConfigKey) -> str:
        if k.at_least is not None and k.at_most is not None:
            return f"[{k.at_least},...,{k.at_most}]"
        if k.at_least is not None:
            return f"[{k.at_least},...]"
        return ""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    for k in sorted(config, key=lambda k: k.name):
        falls_back = f" Falls back to {', '.join(f'`{s}`' for s in k.synonyms)}." if k.synonyms else ""
        lines.append(f"| `{k.name}` | {k.type_name} | `{render(k.default)}` | {valid(k)} | {k.scope} | "
                     f"{f'`{k.topic}`' if k.topic else ''} | {cell(k.doc)}{falls_back} |")
    if config.topic_only:
        lines += ["", "Topic configs with no broker setting behind them:", "",
                  "| topic config | type | default | meaning |", "|---|---|---|---|"]
        for k in sorted(config.topic_only.values(), key=lambda k: k.topic or ""):
            lines.append(f"| `{k.topic}` | {k.type_name} | `{render(k.default)}` | {cell(k.doc)} |")
    return "\n".join(lines) + "\n"
