"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: credentials, server, client.

Pure: each side is a state machine fed one SASL token and answering the next. The broker's
`ScramServer` checks a client against a stored `ScramCredential` (salt, StoredKey, ServerKey,
iterations: never the password); `ScramClient` is what the project's own clients send. Kafka's extras:
the `tokenauth` extension is refused (no delegation tokens), a user name is a SCRAM saslname (`=2C`
for ',' and `=3D` for '='), and iterations lie within [4096, 16384] for a new credential
(AlterUserScramCredentials' rule). hashlib's PBKDF2 and hmac.compare_digest do the crypto.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# AlterUserScramCredentials' mechanism numbers (ScramMechanism in Kafka's clients)
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(Exception):
    """A SCRAM exchange failed; `str(e)` is safe to show the client (it never says which check failed)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError("invalid base64 in SCRAM message") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What a broker keeps of a SCRAM user, in Kafka's form (ZooKeeper's /config/users/<name>)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salted: bytes, salt: bytes, iterations: int) -> "ScramCredential":
        """The credential AlterUserScramCredentials carries the salted password for."""
        hash_name = MECHANISMS[mechanism]
        client_key = _hmac(hash_name, salted, b"Client Key")
        return cls(salt, hashlib.new(hash_name, client_key).digest(), _hmac(hash_name, salted, b"Server Key"),
                   iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        salt = salt if salt is not None else secrets.token_bytes(32)
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                        iterations)

    def to_kafka_string(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},server_key={_b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]), _unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError):
            raise ScramError(f"not a SCRAM credential: {text[:40]!r}") from None


# (user, mechanism) → the user's credential for that mechanism, or None
Lookup = Callable[[str, str], "ScramCredential | None"]


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError("malformed SCRAM message")
        out.setdefault(part[0], part[2:])
    return out


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM message is not UTF-8") from None


def decode_saslname(name: str) -> str:
    """RFC 5802's saslname: '=2C' is ',' and '=3D' is '='; any other '=' is malformed."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise ScramError("malformed user name in SCRAM message")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramServer:
    """The broker's side of one exchange: `first(token)` → server-first; `final(token)` → server-final.

    `lookup(user)` returns the user's credential for this mechanism, or None. After `final` succeeds,
    `user` is the authenticated name.
    """

    def __init__(self, mechanism: str, lookup: Lookup, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._lookup = lookup
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.user: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def first(self, token: bytes) -> bytes:
        if self._state != "first":
            raise ScramError("unexpected SCRAM client-first message")
        self._state = "failed"
        message = _text(token)
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
            raise ScramError("malformed SCRAM client-first message (channel binding is not supported)")
        bare = parts[2]
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("malformed SCRAM client-first message")
        if attrs.get("t") is not None or "tokenauth=true" in bare.split(","):
            raise ScramError("delegation tokens are not supported")
        user = decode_saslname(attrs["n"])
        credential = self._lookup(user, self.mechanism)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._credential, self.user = credential, user
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode("ascii")

    def final(self, token: bytes) -> bytes:
        if self._state != "final" or self._credential is None:
            raise ScramError("unexpected SCRAM client-final message")
        self._state = "failed"
        message = _text(token)
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final message")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        proof = _unb64(proof_part)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        credential = self._credential
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise ScramError("Invalid client credentials")
        self._state = "done"
        return f"v={_b64(_hmac(self._hash, credential.server_key, auth_message))}".encode("ascii")

    def respond(self, token: bytes) -> bytes:
        """The next server message for the client's `token`, whichever step it is."""
        return self.first(token) if self._state == "first" else self.final(token)


class ScramClient:
    """The client's side: `first()` → client-first; `final(server_first)` → client-final; `verify(server_final)`."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._user = user
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={encode_saslname(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = _attributes(text)
        if "e" in attrs:
            raise ScramError(f"the server refused the login: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), _unb64(attrs.get("s", "")), int(attrs.get("i", "0") or 0)
        if not nonce.startswith(self._nonce) or iterations < 1:
            raise ScramError("malformed SCRAM server-first message")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode("utf-8")
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise ScramError(f"the server refused the login: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
            raise ScramError("the server's SCRAM signature is wrong: it does not know this user's credential")

