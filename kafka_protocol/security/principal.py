"""Principals (`User:alice`) and Kafka's `ssl.principal.mapping.rules` for certificate names.

Pure. A principal is a type and a name, written `User:name` in ACLs and `super.users`. A SASL login's
principal is `User:<user name>`; an mTLS client's is `User:` plus its certificate's subject
distinguished name (RFC 2253) passed through the mapping rules, as Kafka's SslPrincipalMapper does:

  RULE:<regex>/<replacement>/[L|U], ... , DEFAULT

The first rule whose regex matches the whole name gives `replacement` ($1... are groups), lower- or
upper-cased with L or U; DEFAULT keeps the name. A name no rule matches cannot log in.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "ANONYMOUS"


@dataclass(frozen=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> "KafkaPrincipal":
        return cls("User", name)

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a principal as Type:name (User:alice), got {text!r}")
        return cls(kind, name)


ANONYMOUS_USER = KafkaPrincipal.user(ANONYMOUS)


class MappingRuleError(ValueError):
    """ssl.principal.mapping.rules cannot be read."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None       # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        out = match.expand(re.sub(r"\$(\d+)", r"\\g<\1>", self.replacement))
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


def parse_rules(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    pos, text = 0, text.strip() or "DEFAULT"
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise MappingRuleError(f"ssl.principal.mapping.rules: cannot read the rule at {text[pos:pos + 30]!r}; "
                                   f"expected RULE:pattern/replacement/[LU] or DEFAULT")
        if m.group(1):
            rules.append(_Rule(None))
        else:
            try:
                rules.append(_Rule(re.compile(m.group(2)), m.group(3), m.group(4)))
            except re.error as e:
                raise MappingRuleError(f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {e}") from None
        pos = m.end()
    return rules


def map_certificate_name(distinguished_name: str, rules: list[_Rule]) -> str | None:
    """The principal name of a certificate subject, or None when no rule matches."""
    for rule in rules:
        name = rule.apply(distinguished_name)
        if name is not None:
            return name
    return None
