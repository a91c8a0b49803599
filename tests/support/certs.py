"""Test certificates: a CA, a broker certificate for 127.0.0.1/localhost, client certificates, as PEM files.

Made with `cryptography` (the product's dependency for PKCS12), the way an operator's CA would:
RSA 2048 keys, SHA-256 signatures. `expired=True` gives a certificate whose validity has ended;
`pkcs12()` writes a keystore the way keytool or openssl would.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12 as _pkcs12
from cryptography.x509.oid import NameOID


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


@dataclass
class Issued:
    key: rsa.RSAPrivateKey
    cert: x509.Certificate
    ca: x509.Certificate

    def write_pem(self, path: Path, password: str | None = None) -> Path:
        """Key and chain in one file: Kafka's ssl.keystore.type=PEM (KIP-651)."""
        path.write_bytes(_pem_key(self.key, password) + self.cert.public_bytes(serialization.Encoding.PEM)
                         + self.ca.public_bytes(serialization.Encoding.PEM))
        return path

    def write_pkcs12(self, path: Path, password: str) -> Path:
        path.write_bytes(_pkcs12.serialize_key_and_certificates(
            b"pylog", self.key, self.cert, [self.ca], serialization.BestAvailableEncryption(password.encode())))
        return path

    def key_pem(self) -> str:
        return _pem_key(self.key).decode()

    def chain_pem(self) -> str:
        return (self.cert.public_bytes(serialization.Encoding.PEM)
                + self.ca.public_bytes(serialization.Encoding.PEM)).decode()


class CertificateAuthority:
    def __init__(self, cn: str = "pylog test CA") -> None:
        self.key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def write_pem(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, cn: str, *, org: str | None = None, hosts: tuple[str, ...] = (), expired: bool = False) -> Issued:
        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = ((now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired
                      else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)))
        builder = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end))
        if hosts:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return Issued(key, builder.sign(self.key, hashes.SHA256()), self.cert)
