"""SSL contexts from Kafka's `ssl.*` settings: the server side of an SSL listener, and the client
side of the broker's own connections to other brokers (Kafka's SslFactory / DefaultSslEngineFactory).

Why through a temporary file: `ssl.SSLContext.load_cert_chain` reads only files, and the stores
are loaded with `cryptography` (keystores.py). The private key is written re-encrypted with a
random one-time password into a private directory (mode 0700) that is removed as soon as OpenSSL
has read it, so no usable key is left on disk.

Cipher suites: Kafka's are Java (IANA) names; OpenSSL's differ, so the usual TLS 1.2 suites are
translated, and OpenSSL names are taken as they are. Python cannot restrict TLS 1.3 suites:
their names are accepted and all of OpenSSL's TLS 1.3 suites stay enabled (docs/security.md).

Who may call: anyone; building a context reads files (start-up, or an executor).
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile

from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
)

from broker.config import ConfigError
from broker.tls.keystores import KeyStore, SslSettings, load_keystore, load_truststore

__all__ = ["TLS_VERSIONS", "client_context", "install_keystore", "server_context"]

TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})
# Java (IANA) name -> OpenSSL name of the TLS 1.2 suites a Kafka config lists in practice
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}


def _common(ctx: ssl.SSLContext, s: SslSettings) -> None:
    """Protocol versions and cipher suites, shared by both sides."""
    enabled = [TLS_VERSIONS[p] for p in s["ssl.enabled.protocols"]]
    ctx.minimum_version, ctx.maximum_version = min(enabled), max(enabled)
    suites = s["ssl.cipher.suites"]
    if not suites:
        return
    known = {c["name"] for c in ctx.get_ciphers()}
    tls12: list[str] = []
    for name in suites:
        if name in _TLS13_SUITES:
            continue
        openssl_name = _IANA_TO_OPENSSL.get(name, name)
        if openssl_name not in known:
            raise ConfigError(f"Invalid value {','.join(suites)!r} for configuration {s.name('ssl.cipher.suites')}: "
                              f"unknown or disabled cipher suite {name}")
        tls12.append(openssl_name)
    if tls12:
        ctx.set_ciphers(":".join(tls12))


def install_keystore(ctx: ssl.SSLContext, store: KeyStore) -> None:
    """Make `store` the certificate `ctx` presents (see the module docstring). On an existing
    context this replaces it for the handshakes that start from now on."""
    password = secrets.token_hex(32).encode()
    pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(password))
    pem += b"".join(c.public_bytes(Encoding.PEM) for c in store.chain)
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as d:
        path = os.path.join(d, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)


def _install_truststore(ctx: ssl.SSLContext, s: SslSettings, purpose: ssl.Purpose) -> None:
    certs = load_truststore(s)
    if certs is None:
        ctx.load_default_certs(purpose)
        return
    ctx.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certs))


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(s: SslSettings, store: KeyStore | None = None) -> ssl.SSLContext:
    """The context of an SSL listener: its keystore (`store`, loaded from `s` if not given), and
    with `ssl.client.auth` requested or required, the truststore client certificates are
    verified against."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, s)
    install_keystore(ctx, store if store is not None else load_keystore(s))
    ctx.verify_mode = _CLIENT_AUTH[s["ssl.client.auth"]]
    if ctx.verify_mode != ssl.CERT_NONE:
        _install_truststore(ctx, s, ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(s: SslSettings, context_class: type[ssl.SSLContext] = ssl.SSLContext) -> ssl.SSLContext:
    """The context of the broker's own connections to the SSL listener `s` is for (and of the
    `odradek` CLI's and Spark source's clients, clients/client_properties.py, which pass their
    own subclass): the truststore to verify the other broker with, hostname verification per
    `ssl.endpoint.identification.algorithm`, and the keystore as client certificate when one is
    configured (so an mTLS inter-broker listener accepts it)."""
    ctx = context_class(ssl.PROTOCOL_TLS_CLIENT)
    _common(ctx, s)
    algorithm = (s["ssl.endpoint.identification.algorithm"] or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(f"Invalid value {algorithm!r} for configuration "
                          f"{s.name('ssl.endpoint.identification.algorithm')}: expected https or empty")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _install_truststore(ctx, s, ssl.Purpose.SERVER_AUTH)
    if s["ssl.keystore.location"] is not None or s["ssl.keystore.key"] is not None:
        install_keystore(ctx, load_keystore(s))
    return ctx
