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
from typing import Callable, Iterable

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


def _invalid(change: Deletion | Upsertion) -> tuple[ErrorCode, str] | None:
    """Why one change can never apply (Kafka's messages), or None."""
    if not change.user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if change.mechanism not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if isinstance(change, Upsertion):
        if change.iterations < MIN_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too few iterations"
        if change.iterations > MAX_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


# a store's writer elsewhere (cluster mode: ZooKeeper): each changed user's credentials, {} for a deleted user
Persist = Callable[[dict[str, dict[str, str]]], None]


class CredentialStore:
    """Every SCRAM credential of the broker; thread-safe, read by logins on the event loop. Kept in the data
    directory, or (cluster mode) written through `persist` and updated from ZooKeeper with `set_user`."""

    def __init__(self, data_dir: Path | None) -> None:
        self._path = data_dir / FILE_NAME if data_dir is not None else None
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = {}
        self.persist: Persist | None = None
        if self._path is not None and self._path.exists():
            self._users = json.loads(self._path.read_text()).get("users", {})

    def set_user(self, user: str, credentials: dict[str, str]) -> None:
        """A user's credentials as another broker wrote them (empty: the user has none now)."""
        with self._lock:
            users = dict(self._users)
            if credentials:
                users[user] = dict(credentials)
            else:
                users.pop(user, None)
            self._users = users

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return ScramCredential.from_kafka_string(text) if text is not None else None

    def describe(self, users: Iterable[str] | None) -> list[Described]:
        """(user, error, message, [(mechanism, iterations)]) for `users` (None: every user with a credential)."""
        names = sorted(self._users) if users is None else list(users)
        out: list[Described] = []
        twice = {n for n in names if names.count(n) > 1}
        for name in dict.fromkeys(names):       # each name once, in request order (Kafka's ZkAdminManager)
            if name in twice:
                out.append((name, ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials for the same "
                            f"user twice in a single request: {name}", []))
                continue
            if not name:
                out.append((name, ErrorCode.resource_not_found, "Username must not be empty", []))
                continue
            creds = self._users.get(name)
            if not creds:
                out.append((name, ErrorCode.resource_not_found, f"Attempt to describe a user credential that does "
                            f"not exist: {name}", []))
                continue
            out.append((name, ErrorCode.none, None,
                        [(m, ScramCredential.from_kafka_string(c).iterations) for m, c in sorted(creds.items())]))
        return out

    def alter(self, deletions: list[Deletion], upsertions: list[Upsertion]) -> dict[str, tuple[ErrorCode, str | None]]:
        """Apply a request's changes with Kafka 3.9's checks (ZkAdminManager.alterUserScramCredentials): a user
        with an invalid change, a (user, mechanism) changed twice or a missing credential to delete is refused
        as a whole; every other user's deletions, then upsertions, are applied. One result per user."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
        for change in changes:
            problem = _invalid(change)
            if problem is not None:
                results.setdefault(change.user, problem)
        pairs = [(c.user, c.mechanism) for c in changes if c.user not in results]
        for user, _ in {p for p in pairs if pairs.count(p) > 1}:
            results[user] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
        with self._lock:
            users = {u: dict(c) for u, c in self._users.items()}
            for d in deletions:
                if d.user not in results and d.mechanism not in users.get(d.user, {}):
                    results[d.user] = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does "
                                                                     "not exist")
            for d in deletions:
                if d.user not in results:
                    del users[d.user][d.mechanism]
            for u in upsertions:
                if u.user not in results:
                    users.setdefault(u.user, {})[u.mechanism] = ScramCredential.from_salted_password(
                        u.mechanism, u.salted_password, u.salt, u.iterations).to_kafka_string()
            for change in changes:
                results.setdefault(change.user, (ErrorCode.none, None))
            users = {u: c for u, c in users.items() if c}
            if users != self._users:
                self._save(users)
                self._users = users
        return results

    def _save(self, users: dict[str, dict[str, str]]) -> None:
        if self.persist is not None:
            changed = {u: users.get(u, {}) for u in set(users) | set(self._users) if users.get(u) != self._users.get(u)}
            self.persist(changed)
            return
        assert self._path is not None
        atomic_write(self._path, json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True).encode(),
                     mode=0o600)
