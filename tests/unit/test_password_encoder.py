"""Kafka's PasswordEncoder format for dynamic passwords: round trips, the stored fields, rotation of the secret."""
from __future__ import annotations

import pytest

from broker.security.password_encoder import PasswordEncoder, PasswordEncoderError, is_encoded


def test_a_password_is_stored_in_kafkas_fields_and_never_as_given() -> None:
    encoded = PasswordEncoder("encoder-secret").encode("p12-sécret")
    fields = dict(part.split(":", 1) for part in encoded.split(","))
    assert set(fields) == {"keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "salt", "iterations",
                           "encryptedPassword", "passwordLength", "initializationVector"}
    assert (fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"], fields["keyLength"], fields["iterations"],
            fields["passwordLength"]) == ("PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", "128", "4096", "10")
    assert "sécret" not in encoded and is_encoded(encoded) and not is_encoded("p12-secret")
    assert PasswordEncoder("encoder-secret").decode(encoded) == "p12-sécret"
    assert PasswordEncoder("encoder-secret").encode("x") != PasswordEncoder("encoder-secret").encode("x")  # salted


def test_the_secret_is_rotated_with_the_old_one_and_a_wrong_one_says_so() -> None:
    stored = PasswordEncoder("first-secret").encode("keystore-password")
    assert PasswordEncoder("second-secret", old_secret="first-secret").decode(stored) == "keystore-password"
    with pytest.raises(PasswordEncoderError, match="password.encoder.old.secret"):
        PasswordEncoder("second-secret").decode(stored)


@pytest.mark.parametrize("kwargs, message", [
    ({"key_factory": "PBKDF2WithHmacMD5"}, "password.encoder.keyfactory.algorithm"),
    ({"cipher": "DES/ECB/NoPadding"}, "password.encoder.cipher.algorithm"),
    ({"key_length": 100}, "password.encoder.key.length"),
    ({"iterations": 10}, "password.encoder.iterations"),
])
def test_encoder_settings_that_cannot_work_name_themselves(kwargs: dict, message: str) -> None:
    with pytest.raises(PasswordEncoderError, match=message):
        PasswordEncoder("s", **kwargs)
