"""Dynamic passwords kept encrypted, as Kafka's PasswordEncoder keeps them (`password.encoder.secret`).

A password given at run time (AlterConfigs of `listener.name.<l>.ssl.keystore.password`, ...) must outlive a
restart, so the broker stores it; Kafka stores it encrypted with a key derived from the broker's
`password.encoder.secret`, and refuses to store one without that secret. The stored form is Kafka's: the
comma-separated `name:value` pairs `encryptedPassword` (base64), `keyFactoryAlgorithm`
(PBKDF2WithHmacSHA512), `cipherAlgorithm` (AES/CBC/PKCS5Padding), `keyLength` (bits), `salt` (base64, 64
random bytes), `iterations`, `initializationVector` (base64) and `passwordLength`. The key is PBKDF2 of the
secret (the standard library's hashlib), the cipher AES (`cryptography`); nothing here is home-made crypto.
`password.encoder.old.secret` decodes what an earlier secret encoded, so the secret can be rotated.
"""
from __future__ import annotations

import base64
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

_HASHES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256", "PBKDF2WithHmacSHA1": "sha1"}
CIPHER = "AES/CBC/PKCS5Padding"
SALT_BYTES = 64


class PasswordEncoderError(ValueError):
    """A setting of the encoder that cannot be used, or a stored password that cannot be decoded."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class PasswordEncoder:
    def __init__(self, secret: str, key_factory: str = "PBKDF2WithHmacSHA512", cipher: str = CIPHER,
                 key_length: int = 128, iterations: int = 4096, old_secret: str | None = None) -> None:
        if key_factory not in _HASHES:
            raise PasswordEncoderError(f"password.encoder.keyfactory.algorithm={key_factory}: supported are "
                                       f"{', '.join(_HASHES)}")
        if cipher != CIPHER:
            raise PasswordEncoderError(f"password.encoder.cipher.algorithm={cipher}: supported is {CIPHER}")
        if key_length not in (128, 192, 256):
            raise PasswordEncoderError(f"password.encoder.key.length={key_length}: AES keys are 128, 192 or 256 bits")
        if iterations < 1024:
            raise PasswordEncoderError(f"password.encoder.iterations={iterations}: at least 1024 (Kafka's minimum)")
        self.secret, self.old_secret = secret, old_secret
        self.key_factory, self.key_length, self.iterations = key_factory, key_length, iterations

    def encode(self, password: str) -> str:
        salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
        key = hashlib.pbkdf2_hmac(_HASHES[self.key_factory], self.secret.encode(), salt, self.iterations,
                                  self.key_length // 8)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(plain) + encryptor.finalize()
        fields = {"keyFactoryAlgorithm": self.key_factory, "cipherAlgorithm": CIPHER, "keyLength": self.key_length,
                  "salt": _b64(salt), "iterations": self.iterations, "encryptedPassword": _b64(encrypted),
                  "passwordLength": len(password), "initializationVector": _b64(iv)}
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password of `encoded`, with the secret or else the old one; PasswordEncoderError if neither."""
        for secret in (self.secret, self.old_secret):
            if secret is not None:
                try:
                    return _decode(encoded, secret)
                except PasswordEncoderError:
                    continue
        raise PasswordEncoderError("a stored dynamic password cannot be decoded with password.encoder.secret "
                                   "(nor password.encoder.old.secret): was the secret changed without keeping "
                                   "the old one as password.encoder.old.secret?")


def is_encoded(value: str) -> bool:
    return "encryptedPassword:" in value and "initializationVector:" in value


def _decode(encoded: str, secret: str) -> str:
    try:
        fields = dict(part.split(":", 1) for part in encoded.split(","))
        hash_name = _HASHES[fields["keyFactoryAlgorithm"]]
        if fields["cipherAlgorithm"] != CIPHER:
            raise PasswordEncoderError(f"stored with {fields['cipherAlgorithm']}")
        key = hashlib.pbkdf2_hmac(hash_name, secret.encode(), base64.b64decode(fields["salt"]),
                                  int(fields["iterations"]), int(fields["keyLength"]) // 8)
        decryptor = Cipher(algorithms.AES(key), modes.CBC(base64.b64decode(fields["initializationVector"]))).decryptor()
        padded = decryptor.update(base64.b64decode(fields["encryptedPassword"])) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        password = (unpadder.update(padded) + unpadder.finalize()).decode()
    except (KeyError, ValueError, TypeError) as e:     # a wrong key shows as bad padding (ValueError)
        raise PasswordEncoderError(f"cannot decode: {e}") from None
    if len(password) != int(fields["passwordLength"]):
        raise PasswordEncoderError("cannot decode: the length does not match")
    return password
