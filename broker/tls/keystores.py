"""Keystores and truststores as Kafka's `ssl.keystore.*` / `ssl.truststore.*` describe them.

Why here and not in the ssl module: Python's `ssl` reads PEM files only, while Kafka users carry
PKCS12 stores (what `keytool` makes) and PEM given inline in the config. So every store is
loaded with the `cryptography` package into a private key and certificates -- which also lets a
wrong password or a file that is no store be refused at start with a message naming the key --
and handed to the ssl module as PEM (contexts.py).

Kafka's default store type is JKS; Java reads a PKCS12 file under that type too, so Odradek
does the same, and refuses a real JKS file (its magic number) naming PKCS12 and PEM: there is no
JKS reader for Python.

Who may call: anyone; reading a store is blocking file I/O (at start-up, or from an executor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

from broker.config import CONFIGS, ConfigError, listener_config, parse_value

__all__ = ["SSL_KEYS", "KeyStore", "SslSettings", "load_keystore", "load_truststore"]

SSL_KEYS = tuple(d.key for d in CONFIGS.values() if d.key.startswith("ssl."))
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


@dataclass(frozen=True)
class SslSettings:
    """The `ssl.*` settings one listener uses: its `listener.name.<l>.ssl.*` overrides over the
    broker-wide keys, key by key (Kafka's valuesWithPrefixOverride), each value parsed, and the
    key each came from, so an error names the key the operator set."""

    listener: str
    values: Mapping[str, Any]
    sources: Mapping[str, str]

    @classmethod
    def of(cls, originals: Mapping[str, Any], listener: str) -> SslSettings:
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for key in SSL_KEYS:
            source, raw = listener_config(originals, listener, key)
            d = CONFIGS[key]
            values[key] = d.default if raw is None else parse_value(dataclasses.replace(d, key=source), raw)
            sources[key] = source
        return cls(listener, values, sources)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def name(self, key: str) -> str:
        return self.sources[key]

    def password(self, key: str) -> bytes | None:
        value = self.values[key]
        return None if value is None else str(value).encode()


@dataclass(frozen=True)
class KeyStore:
    key: PrivateKeyTypes
    chain: list[x509.Certificate]


def _read(s: SslSettings, key: str) -> bytes:
    path = Path(s[key])
    try:
        return path.read_bytes()
    except OSError as e:
        raise ConfigError(f"Invalid value {s[key]!r} for configuration {s.name(key)}: cannot read it: "
                          f"{e.strerror or e}") from None


def _pem_certificates(data: bytes, what: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise ConfigError(f"Invalid value for configuration {what}: no PEM certificate in it ({e})") from None


def _pem_key(s: SslSettings, data: bytes, what: str) -> PrivateKeyTypes:
    start = data.find(b"-----BEGIN ")
    while start >= 0 and b"PRIVATE KEY-----" not in data[start:data.find(b"\n", start)]:
        start = data.find(b"-----BEGIN ", start + 1)
    if start < 0:
        raise ConfigError(f"Invalid value for configuration {what}: no PEM private key in it")
    try:
        return load_pem_private_key(data[start:], s.password("ssl.key.password"))
    except TypeError as e:  # encrypted without a password, or a password for a plain key
        raise ConfigError(f"Invalid value for configuration {s.name('ssl.key.password')}: {e} "
                          f"(the private key of {what})") from None
    except ValueError as e:
        raise ConfigError(f"Invalid value for configuration {s.name('ssl.key.password')}: the private key of "
                          f"{what} cannot be decrypted or read: {e}") from None


def _pkcs12(s: SslSettings, store: str) -> pkcs12.PKCS12KeyAndCertificates:
    location, password = f"ssl.{store}.location", f"ssl.{store}.password"
    data = _read(s, location)
    if data[:4] == _JKS_MAGIC:
        raise ConfigError(f"Invalid value {s[location]!r} for configuration {s.name(location)}: it is a JKS "
                          f"keystore, which Odradek cannot read: convert it to PKCS12 (keytool -importkeystore "
                          f"-deststoretype PKCS12) or PEM and set {s.name(f'ssl.{store}.type')} accordingly")
    try:
        return pkcs12.load_pkcs12(data, s.password(password))
    except ValueError as e:
        raise ConfigError(f"Invalid value for configuration {s.name(password)} (or {s.name(location)}): "
                          f"{s[location]} cannot be opened as a PKCS12 {store}: {e}") from None


def load_keystore(s: SslSettings) -> KeyStore:
    """The private key and certificate chain an SSL listener presents (and the broker's own TLS
    connections present as their client certificate). ConfigError naming the key if there is
    none or it cannot be read."""
    chain_text, key_text = s["ssl.keystore.certificate.chain"], s["ssl.keystore.key"]
    kind = s["ssl.keystore.type"]
    if chain_text is not None or key_text is not None:
        if chain_text is None or key_text is None:
            missing = "ssl.keystore.key" if key_text is None else "ssl.keystore.certificate.chain"
            raise ConfigError(f"Missing required configuration {s.name(missing)}: a PEM keystore given inline "
                              "needs both the certificate chain and the private key")
        if kind != "PEM":
            raise ConfigError(f"Invalid value {kind!r} for configuration {s.name('ssl.keystore.type')}: a keystore "
                              "given inline (ssl.keystore.key) must be of type PEM")
        return KeyStore(_pem_key(s, key_text.encode(), s.name("ssl.keystore.key")),
                        _pem_certificates(chain_text.encode(), s.name("ssl.keystore.certificate.chain")))
    if s["ssl.keystore.location"] is None:
        raise ConfigError(f"Missing required configuration {s.name('ssl.keystore.location')}: an SSL listener "
                          f"({s.listener}) needs a keystore (or ssl.keystore.type=PEM with "
                          "ssl.keystore.certificate.chain and ssl.keystore.key)")
    what = s.name("ssl.keystore.location")
    if kind == "PEM":
        data = _read(s, "ssl.keystore.location")
        return KeyStore(_pem_key(s, data, what), _pem_certificates(data, what))
    store = _pkcs12(s, "keystore")
    if store.key is None or store.cert is None:
        raise ConfigError(f"Invalid value {s['ssl.keystore.location']!r} for configuration {what}: the PKCS12 "
                          "keystore holds no private key with its certificate")
    return KeyStore(store.key, [store.cert.certificate, *(c.certificate for c in store.additional_certs)])


def load_truststore(s: SslSettings) -> list[x509.Certificate] | None:
    """The trusted certificates, or None when no truststore is configured (then the system's
    CAs are trusted, as Java's default truststore is)."""
    inline = s["ssl.truststore.certificates"]
    if inline is not None:
        if s["ssl.truststore.type"] != "PEM":
            raise ConfigError(f"Invalid value {s['ssl.truststore.type']!r} for configuration "
                              f"{s.name('ssl.truststore.type')}: certificates given inline "
                              "(ssl.truststore.certificates) must be of type PEM")
        return _pem_certificates(inline.encode(), s.name("ssl.truststore.certificates"))
    if s["ssl.truststore.location"] is None:
        return None
    if s["ssl.truststore.type"] == "PEM":
        return _pem_certificates(_read(s, "ssl.truststore.location"), s.name("ssl.truststore.location"))
    store = _pkcs12(s, "truststore")
    certs = [c.certificate for c in ([store.cert] if store.cert else []) + list(store.additional_certs)]
    if not certs:
        raise ConfigError(f"Invalid value {s['ssl.truststore.location']!r} for configuration "
                          f"{s.name('ssl.truststore.location')}: the truststore holds no certificate")
    return certs
