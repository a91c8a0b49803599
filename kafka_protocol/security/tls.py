"""TLS contexts from Kafka's `ssl.*` settings, for the broker's listeners and for the project's clients.

Reads the key and certificate files the settings name (PEM as KIP-651 defines it, or PKCS12) but opens
no connection. A keystore holds this side's private key and certificate chain; a truststore the CA
certificates that the other side's certificate must chain to. Kafka's names, Kafka's defaults:

  ssl.keystore.type            PEM | PKCS12 (JKS: convert with keytool, the error says how)
  ssl.keystore.location        a PEM file with the key and the chain, or a PKCS12 file
  ssl.keystore.password        PKCS12's password (PEM: unused)
  ssl.key.password             the private key's password (PEM: an encrypted key)
  ssl.keystore.key / ssl.keystore.certificate.chain   PEM given inline instead of a file
  ssl.truststore.type / .location / .password / ssl.truststore.certificates   the same for trust
  ssl.client.auth              required | requested | none (the broker side)
  ssl.enabled.protocols        TLSv1.2,TLSv1.3
  ssl.cipher.suites            OpenSSL cipher names for TLSv1.2 (empty: OpenSSL's defaults)
  ssl.endpoint.identification.algorithm   https (check the broker's host name) | "" (clients)

An OpenSSL context takes its key only from a file, so an inline or PKCS12 key passes through a file
created private (0600) and removed as soon as it is loaded.
"""
from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path
from typing import Any, Mapping

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; the message names the setting and the fix."""


def _get(settings: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = settings.get(key)
    return default if value is None or value == "" else value


def _store_type(settings: Mapping[str, Any], prefix: str) -> str:
    kind = str(_get(settings, f"{prefix}.type", "")).upper()
    location = str(_get(settings, f"{prefix}.location", ""))
    if not kind:          # Kafka's default is JKS; guess from the file the way an operator would expect
        kind = "PKCS12" if location.lower().endswith((".p12", ".pfx", ".pkcs12")) else "PEM"
    if kind == "JKS":
        raise TlsConfigError(f"{prefix}.type=JKS: Java keystores are not readable here; convert it once with "
                             f"`keytool -importkeystore -srckeystore {location or 'store.jks'} -destkeystore "
                             f"store.p12 -deststoretype PKCS12` and set {prefix}.type=PKCS12")
    if kind not in ("PEM", "PKCS12"):
        raise TlsConfigError(f"{prefix}.type={kind}: expected PEM or PKCS12")
    return kind


def _read(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{setting}={path}: cannot read it ({e.strerror})") from None


def _pkcs12(data: bytes, password: str | None, setting: str) -> tuple[Any, Any, list[Any]]:
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise TlsConfigError(f"{setting}: not a PKCS12 file, or the password is wrong") from None


def _pem(obj: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization
    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    return obj.public_bytes(serialization.Encoding.PEM)


def _load_pem_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None, setting: str) -> None:
    """load_cert_chain from bytes, through a private file removed at once."""
    fd, path = tempfile.mkstemp(prefix="pylog-key-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
        os.close(fd)
        ctx.load_cert_chain(path, password=password or None)
    except ssl.SSLError as e:
        raise TlsConfigError(f"{setting}: the key or certificate cannot be used ({e.reason or e}); check the "
                             f"file and ssl.key.password") from None
    finally:
        os.unlink(path)


def load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, Any]) -> bool:
    """Load this side's key and chain into `ctx` (again, for a reload); False when none is configured."""
    inline_key = _get(settings, "ssl.keystore.key")
    location = _get(settings, "ssl.keystore.location")
    if inline_key is None and location is None:
        return False
    key_password = _get(settings, "ssl.key.password")
    if inline_key is not None:
        chain = _get(settings, "ssl.keystore.certificate.chain")
        if chain is None:
            raise TlsConfigError("ssl.keystore.key is set without ssl.keystore.certificate.chain")
        _load_pem_chain(ctx, f"{inline_key}\n{chain}\n".encode(), key_password, "ssl.keystore.key")
        return True
    if _store_type(settings, "ssl.keystore") == "PKCS12":
        key, cert, extra = _pkcs12(_read(location, "ssl.keystore.location"),
                                   _get(settings, "ssl.keystore.password"), "ssl.keystore.location")
        if key is None or cert is None:
            raise TlsConfigError(f"ssl.keystore.location={location}: the PKCS12 file has no private key")
        _load_pem_chain(ctx, _pem(key) + _pem(cert) + b"".join(_pem(c) for c in extra), None,
                        "ssl.keystore.location")
        return True
    _read(location, "ssl.keystore.location")
    try:
        ctx.load_cert_chain(location, password=key_password)
    except ssl.SSLError as e:
        raise TlsConfigError(f"ssl.keystore.location={location}: not a PEM file with a private key and its "
                             f"certificate ({e.reason or e}); check ssl.key.password for an encrypted key") from None
    return True


def load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, Any]) -> bool:
    """Load the trusted CA certificates into `ctx`; False when none is configured."""
    inline = _get(settings, "ssl.truststore.certificates")
    location = _get(settings, "ssl.truststore.location")
    try:
        if inline is not None:
            ctx.load_verify_locations(cadata=str(inline))
            return True
        if location is None:
            return False
        if _store_type(settings, "ssl.truststore") == "PKCS12":
            from cryptography.hazmat.primitives.serialization import pkcs12
            data = _read(location, "ssl.truststore.location")
            password = _get(settings, "ssl.truststore.password")
            try:
                store = pkcs12.load_pkcs12(data, password.encode() if password else None)
            except ValueError:
                raise TlsConfigError(f"ssl.truststore.location={location}: not a PKCS12 file, or the password is "
                                     f"wrong") from None
            certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
            if not certs:
                raise TlsConfigError(f"ssl.truststore.location={location}: the PKCS12 file holds no certificate")
            ctx.load_verify_locations(cadata=b"".join(_pem(c) for c in certs).decode())
            return True
        _read(location, "ssl.truststore.location")
        ctx.load_verify_locations(cafile=location)
        return True
    except ssl.SSLError as e:
        raise TlsConfigError(f"ssl.truststore: no usable CA certificate ({e.reason or e})") from None


def _protocols(ctx: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    names = [p.strip() for p in str(_get(settings, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3")).split(",") if p.strip()]
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        raise TlsConfigError(f"ssl.enabled.protocols={','.join(names)}: supported are TLSv1.2 and TLSv1.3")
    versions = sorted(PROTOCOLS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = _get(settings, "ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in str(ciphers).split(",") if c.strip()))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites={ciphers}: OpenSSL knows none of these; give OpenSSL's names "
                                 f"(`openssl ciphers -stdname` lists them beside the standard ones)") from None


def server_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """A listener's context: its keystore, the trust for client certificates, ssl.client.auth."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, settings)
    if not load_keystore(ctx, settings):
        raise TlsConfigError("a TLS listener needs ssl.keystore.location (or ssl.keystore.key and "
                             "ssl.keystore.certificate.chain): the broker's key and certificate")
    auth = str(_get(settings, "ssl.client.auth", "none")).lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth}: expected required, requested or none")
    trusted = load_truststore(ctx, settings)
    if auth != "none" and not trusted:
        raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location: the CA that signs client "
                             f"certificates")
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def client_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """A client's context: trust (the system's CAs when no truststore is given), an optional keystore
    for mTLS, and host name checking unless ssl.endpoint.identification.algorithm is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, settings)
    if not load_truststore(ctx, settings):
        ctx.load_default_certs()
    load_keystore(ctx, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https") != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def peer_distinguished_name(der: bytes) -> str:
    """The RFC 2253 name of a DER certificate's subject, as Java's X500Principal.getName() gives it."""
    from cryptography import x509
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
