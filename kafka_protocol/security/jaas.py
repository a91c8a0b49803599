"""Kafka's `sasl.jaas.config` strings: `<LoginModule class> <flag> key="value" ...;`.

Pure. Kafka reads them with a StreamTokenizer (JaasConfig): a login module's class, a control flag
(required, requisite, sufficient, optional), then options `name=value` where a value is a bare word or
a double-quoted string with backslash escapes, ended by ';'. One string holds one login module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A malformed sasl.jaas.config; the message names what is wrong (never a value, which may be a secret)."""


@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PLAIN's broker-side users: the `user_<name>` options (Kafka's PlainServerCallbackHandler)."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, quoted) pairs; '=' and ';' are tokens of their own."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c == '"':
            j, chars = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                chars.append(text[j])
                j += 1
            if j >= n:
                raise JaasError("sasl.jaas.config has an unterminated quoted value")
            out.append(("".join(chars), True))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append((text[i:j], False))
            i = j
    return out


def parse(text: str) -> JaasEntry:
    """The one login module of a sasl.jaas.config value."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise JaasError("sasl.jaas.config must be '<LoginModule> required key=\"value\" ...;'")
    module, flag = tokens[0][0], tokens[1][0].lower()
    if flag not in FLAGS:
        raise JaasError(f"sasl.jaas.config: the control flag after {module} must be one of {', '.join(FLAGS)}")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if (";", False) in body:
        raise JaasError("sasl.jaas.config holds more than one login module")
    i = 0
    while i < len(body):
        key, quoted = body[i]
        if quoted or key == "=" or i + 1 >= len(body) or body[i + 1] != ("=", False):
            raise JaasError("sasl.jaas.config: options must be key=value pairs")
        if i + 2 >= len(body) or body[i + 2] == ("=", False):
            raise JaasError(f"sasl.jaas.config: option {key} is missing its value")
        options[key] = body[i + 2][0]
        i += 3
    return JaasEntry(module, flag, options)


def client_entry(mechanism: str, user: str, password: str) -> str:
    """The sasl.jaas.config a client uses to log in with `mechanism` (PLAIN or SCRAM-SHA-*)."""
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    esc = lambda s: s.replace("\\", "\\\\").replace('"', '\\"')  # noqa: E731
    return f'{module} required username="{esc(user)}" password="{esc(password)}";'
