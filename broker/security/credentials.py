"""SCRAM users as Kafka keeps them: per user and mechanism, the salt, StoredKey, ServerKey and iterations.

Never a password: AlterUserScramCredentials carries a salted password, from which the store keeps
Kafka's credential string (`salt=...,stored_key=...,server_key=...,iterations=4096`, the value of
ZooKeeper's /config/users/<name> in Kafka's ZooKeeper mode). The embedded broker keeps them in
`scram-credentials.json` in its data directory, written atomically and readable by its owner only;
`alter` applies a request's upsertions and deletions with Kafka's per-user errors.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from broker.log.fileutil import atomic_write
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential

FILE_NAME = "scram-credentials.json"
# (user, error, message, [(mechanism, iterations)]): one user's DescribeUserScramCredentials result
Described = tuple[str, ErrorCode, "str | None", list[tuple[str, int]]]


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: str           # SCRAM-SHA-256 or SCRAM-SHA-512 ("" for a code Kafka does not know)
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: str


class CredentialStore:
    """Every SCRAM credential of the (embedded) broker; thread-safe, read by logins on the event loop."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = {}
        if self._path.exists():
            self._users = json.loads(self._path.read_text()).get("users", {})

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return ScramCredential.from_kafka_string(text) if text is not None else None

    def describe(self, users: Iterable[str] | None) -> list[Described]:
        """(user, error, message, [(mechanism, iterations)]) for `users` (None: every user with a credential)."""
        names = sorted(self._users) if users is None else list(users)
        out: list[Described] = []
        seen: set[str] = set()
        for name in names:
            if name in seen:
                out.append((name, ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials for the same "
                            f"user twice in a single request: {name}", []))
                continue
            seen.add(name)
            creds = self._users.get(name)
            if not creds:
                out.append((name, ErrorCode.resource_not_found, f"Attempt to describe a user credential that does "
                            f"not exist: {name}", []))
                continue
            out.append((name, ErrorCode.none, None,
                        [(m, ScramCredential.from_kafka_string(c).iterations) for m, c in sorted(creds.items())]))
        return out

    def alter(self, deletions: list[Deletion], upsertions: list[Upsertion]) -> dict[str, tuple[ErrorCode, str | None]]:
        """Apply a request's changes; the result of each user named (Kafka's checks, all before any write)."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        counts: dict[str, int] = {}
        for user in [d.user for d in deletions] + [u.user for u in upsertions]:
            counts[user] = counts.get(user, 0) + 1
        with self._lock:
            users = {u: dict(c) for u, c in self._users.items()}
            for d in deletions:
                problem = self._problem(d.user, d.mechanism, counts)
                if problem is None and d.mechanism not in users.get(d.user, {}):
                    problem = (ErrorCode.resource_not_found, f"Attempt to delete a user credential that does not "
                               f"exist: {d.user}")
                if problem is not None:
                    results[d.user] = problem
                    continue
                del users[d.user][d.mechanism]
                if not users[d.user]:
                    del users[d.user]
                results[d.user] = (ErrorCode.none, None)
            for u in upsertions:
                problem = self._problem(u.user, u.mechanism, counts)
                if problem is None and not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
                    problem = (ErrorCode.unacceptable_credential, f"Iterations {u.iterations} is "
                               f"{'less than the minimum' if u.iterations < MIN_ITERATIONS else 'more than the maximum'}"
                               f" {MIN_ITERATIONS if u.iterations < MIN_ITERATIONS else MAX_ITERATIONS} for "
                               f"{u.mechanism}")
                if problem is None and (not u.salt or not u.salted_password):
                    problem = (ErrorCode.unacceptable_credential, "Salt and salted password must not be empty")
                if problem is not None:
                    results[u.user] = problem
                    continue
                credential = ScramCredential.from_salted_password(u.mechanism, u.salted_password, u.salt, u.iterations)
                users.setdefault(u.user, {})[u.mechanism] = credential.to_kafka_string()
                results[u.user] = (ErrorCode.none, None)
            if users != self._users:
                self._save(users)
                self._users = users
        return results

    @staticmethod
    def _problem(user: str, mechanism: str, counts: dict[str, int]) -> tuple[ErrorCode, str] | None:
        if not user:
            return ErrorCode.unacceptable_credential, "Username must not be empty"
        if counts[user] > 1:
            return ErrorCode.duplicate_resource, f"Cannot have multiple alterations for the same user: {user}"
        if mechanism not in MECHANISMS:
            return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        return None

    def _save(self, users: dict[str, dict[str, str]]) -> None:
        atomic_write(self._path, json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True).encode(),
                     mode=0o600)
