"""Kafka's client properties (a `--command-config` file, Spark's `kafka.*` options) as the settings
of the clients Odradek's tools build: kafka-python (admin, producer, consumer) and librdkafka
(`odradek perf`).

Why one module: a Kafka user has one client properties file -- `security.protocol`, `ssl.*`,
`sasl.*`, `client.id` -- that Kafka's own tools and Spark's kafka source take as they are. Every
Odradek client takes the same file through this mapping, so a key means the same thing to
`odradek topics`, `odradek perf` and the Spark source, and a key none of them can honour is
refused naming the key, never dropped: a security key silently ignored is a connection that is
less secure than its operator believes.

The mapping:
* `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (Kafka's default PLAINTEXT); an
  `ssl.*` key without SSL or a `sasl.*` key without SASL is refused (Kafka would ignore it).
* TLS: the keys of broker/tls (truststore and keystore as PKCS12, PEM file or inline PEM, JKS
  refused naming PKCS12/PEM, `ssl.key.password`, `ssl.endpoint.identification.algorithm` empty =
  no hostname check, `ssl.enabled.protocols`, `ssl.cipher.suites`) build an `ssl.SSLContext` with
  the broker's own client-side code (broker.tls.contexts.client_context), and `ssl.protocol`
  TLSv1.2 keeps TLS 1.3 off as in Java. For librdkafka the stores are read the same way and given
  inline as PEM (`ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`): no key is written to disk.
* SASL: `sasl.mechanism` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI and
  OAUTHBEARER are refused) with `sasl.jaas.config` naming PlainLoginModule or ScramLoginModule
  and its `username` / `password` (broker/sasl/jaas.py, the broker's own JAAS parser).
* Any other key is a kafka-python setting under its Java name (`request.timeout.ms` ->
  `request_timeout_ms`), typed after kafka-python's default, given to each client that has it
  (as a Java client ignores a producer key in an admin client); a key no kafka-python client
  has is refused. The (de)serializer classes are the command's, as in Kafka's console tools.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from broker.config import ConfigError
from broker.java_properties import parse_properties
from broker.sasl.jaas import JaasConfigError, parse_jaas_config
from broker.tls.contexts import TLS_VERSIONS, client_context
from broker.tls.keystores import SslSettings, load_keystore, load_truststore

__all__ = ["COMMAND_CONFIG_ENV", "ClientConfigError", "ClientProperties", "PropertiesSslContext",
           "kafka_python_name", "read_command_config", "typed_setting"]

Role = Literal["admin", "producer", "consumer"]

#: The default of --command-config when the option is not given (Kafka's tools have no such
#: variable; ODRADEK_BOOTSTRAP is the precedent).
COMMAND_CONFIG_ENV = "ODRADEK_COMMAND_CONFIG"

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                 "org.apache.kafka.common.security.scram.ScramLoginModule")
#: The ssl.* keys a Java client has that the SSLContext honours.
SSL_KEYS = ("ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.keystore.type",
            "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
            "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
            "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
            "ssl.endpoint.identification.algorithm")
SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config")
#: Java-only keys accepted at their Kafka default, where they mean what Python's ssl does anyway.
JAVA_DEFAULTS = {"ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX"}
#: Set by the command (bytes in, bytes out), as Kafka's console tools set them.
COMMAND_OWNED = ("key.serializer", "value.serializer", "key.deserializer", "value.deserializer")
#: kafka-python settings whose default is None but whose value is a number.
_NUMERIC_NONE_DEFAULTS = ("receive_buffer_bytes", "send_buffer_bytes")


class ClientConfigError(ValueError):
    """A client property that cannot be honoured; `key` is its Java name (None: several)."""

    def __init__(self, key: str | None, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(f"{key}: {reason}" if key else reason)


class PropertiesSslContext(ssl.SSLContext):
    """An SSLContext that pickles as the `ssl.*` properties it was built from: Spark ships a
    source's client settings to its executors, and each rebuilds the context there (reading the
    stores on that machine, as Java's clients do)."""

    ssl_properties: dict[str, str]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ssl_context, (self.ssl_properties,))


def _defaults(role: Role) -> dict[str, Any]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient

    return {"admin": KafkaAdminClient, "producer": KafkaProducer, "consumer": KafkaConsumer}[role].DEFAULT_CONFIG


def kafka_python_name(key: str) -> str:
    """`fetch.max.bytes` -> `fetch_max_bytes`."""
    return key.replace(".", "_")


def typed_setting(key: str, raw: str, default: Any) -> Any:
    """A Java client property's string as the kafka-python setting it names (typed after that
    setting's default)."""
    name, text = kafka_python_name(key), raw.strip()
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if name == "acks":
            return text if text == "all" else int(text)
        if isinstance(default, int) or name in _NUMERIC_NONE_DEFAULTS:
            return int(text)
        if isinstance(default, float):
            return float(text) if "." in text or text.lower() == "inf" else int(text)
        if name == "api_version":
            return tuple(int(part) for part in text.split("."))
        if name == "compression_type":
            return None if text.lower() == "none" else text.lower()
    except ValueError:
        raise ClientConfigError(key, f"{raw!r} is not a valid value") from None
    if default is None or isinstance(default, str):
        return text
    raise ClientConfigError(key, "cannot be set from a string (kafka-python takes a Python object)")


def _ssl_context(ssl_properties: Mapping[str, str]) -> PropertiesSslContext:
    settings = _ssl_settings(ssl_properties)
    try:
        ctx = client_context(settings, PropertiesSslContext)
    except ConfigError as e:
        raise ClientConfigError(None, str(e)) from None
    assert isinstance(ctx, PropertiesSslContext)
    ctx.ssl_properties = dict(ssl_properties)
    protocol = settings["ssl.protocol"]
    if protocol in TLS_VERSIONS:  # Java: a TLSv1.2 context never speaks TLS 1.3, whatever is enabled
        cap = TLS_VERSIONS[protocol]
        if cap < ctx.minimum_version:
            raise ClientConfigError("ssl.protocol", f"{protocol} is below every version in ssl.enabled.protocols")
        ctx.maximum_version = min(ctx.maximum_version, cap)
    return ctx


def _ssl_settings(ssl_properties: Mapping[str, str]) -> SslSettings:
    try:
        return SslSettings.of(dict(ssl_properties), "client")
    except ConfigError as e:
        raise ClientConfigError(None, str(e)) from None


@dataclass(frozen=True)
class ClientProperties:
    """Kafka client properties (Java names, raw strings), checked when made; `origin` says where
    they came from in messages (a file name, or Spark's kafka.* options)."""

    values: Mapping[str, str] = field(default_factory=dict)
    origin: str = "client properties"
    _context: PropertiesSslContext | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = {k: v for k, v in self.values.items() if k not in COMMAND_OWNED}
        protocol = self.security_protocol
        if protocol not in PROTOCOLS:
            raise ClientConfigError("security.protocol", f"{values['security.protocol']!r} is not one of "
                                    f"{', '.join(PROTOCOLS)}")
        for key, value in values.items():
            if key in JAVA_DEFAULTS:
                if value.strip() != JAVA_DEFAULTS[key]:
                    raise ClientConfigError(key, f"only Kafka's default {JAVA_DEFAULTS[key]} can be honoured "
                                            "(there is no Java security provider here)")
            elif key.startswith("ssl."):
                if key not in SSL_KEYS:
                    raise ClientConfigError(key, "is not a TLS setting Odradek's clients can honour")
                if "SSL" not in protocol:
                    raise ClientConfigError(key, f"is set but security.protocol is {protocol}: set "
                                            "security.protocol=SSL or SASL_SSL")
            elif key.startswith("sasl."):
                if key not in SASL_KEYS:
                    raise ClientConfigError(key, "is not a SASL setting Odradek's clients can honour "
                                            f"(they take {', '.join(SASL_KEYS)})")
                if not protocol.startswith("SASL"):
                    raise ClientConfigError(key, f"is set but security.protocol is {protocol}: set "
                                            "security.protocol=SASL_PLAINTEXT or SASL_SSL")
            elif key != "security.protocol" and key != "bootstrap.servers":
                name = kafka_python_name(key)
                known = [r for r in ("admin", "producer", "consumer") if name in _defaults(r)]  # type: ignore[arg-type]
                if not known:
                    raise ClientConfigError(key, "is not a client setting Odradek's clients (kafka-python) have")
                typed_setting(key, value, _defaults(known[0])[name])  # type: ignore[arg-type]
        if protocol.startswith("SASL"):
            self.sasl_credentials()
        if "SSL" in protocol:  # a wrong password or unreadable store is named now, not at connect
            object.__setattr__(self, "_context", _ssl_context(self._ssl_values()))

    @property
    def security_protocol(self) -> str:
        return self.values.get("security.protocol", "PLAINTEXT").strip().upper()

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    def _ssl_values(self) -> dict[str, str]:
        return {k: v for k, v in self.values.items() if k in SSL_KEYS}

    def ssl_context(self) -> PropertiesSslContext | None:
        """The TLS client context (one for every client of the command), or None without TLS."""
        return self._context

    def sasl_credentials(self) -> tuple[str, str, str]:
        """(mechanism, username, password) from sasl.mechanism and sasl.jaas.config."""
        mechanism = self.values.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            what = mechanism if "sasl.mechanism" in self.values else "unset, so Kafka's default GSSAPI (Kerberos),"
            raise ClientConfigError("sasl.mechanism", f"{what} cannot be used: Odradek's clients speak "
                                    f"{', '.join(MECHANISMS)}")
        jaas = self.values.get("sasl.jaas.config")
        if jaas is None:
            raise ClientConfigError("sasl.jaas.config", f"is required with sasl.mechanism={mechanism}: "
                                    'e.g. org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    'username="alice" password="...";')
        try:
            entry = parse_jaas_config(jaas)
        except JaasConfigError as e:
            raise ClientConfigError("sasl.jaas.config", str(e)) from None
        if entry.login_module not in LOGIN_MODULES:
            raise ClientConfigError("sasl.jaas.config", f"login module {entry.login_module} cannot be used: "
                                    f"Odradek's clients take {' or '.join(LOGIN_MODULES)}")
        extra = sorted(set(entry.options) - {"username", "password"})
        if extra:
            raise ClientConfigError("sasl.jaas.config", f"option {extra[0]} cannot be honoured (only username "
                                    "and password are)")
        missing = [o for o in ("username", "password") if o not in entry.options]
        if missing:
            raise ClientConfigError("sasl.jaas.config", f"the login module entry has no {missing[0]}")
        return mechanism, entry.options["username"], entry.options["password"]

    def kafka_python(self, role: Role) -> dict[str, Any]:
        """The kafka-python keyword arguments of a `role` client (bootstrap servers excluded)."""
        defaults = _defaults(role)
        out: dict[str, Any] = {}
        for key, value in self.values.items():
            if key.startswith(("ssl.", "sasl.", "security.")) or key in COMMAND_OWNED or key == "bootstrap.servers":
                continue
            name = kafka_python_name(key)
            if name in defaults:
                out[name] = typed_setting(key, value, defaults[name])
        out |= self.security_kafka_python()
        return out

    def security_kafka_python(self) -> dict[str, Any]:
        """Just the security settings, as kafka-python keyword arguments."""
        out: dict[str, Any] = {}
        if "security.protocol" in self.values:
            out["security_protocol"] = self.security_protocol
        ctx = self.ssl_context()
        if ctx is not None:
            out["ssl_context"] = ctx
        if self.sasl:
            mechanism, user, password = self.sasl_credentials()
            out |= {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        return out

    def librdkafka(self) -> dict[str, str]:
        """librdkafka's properties for the same settings. Its names are Java's for the common
        keys; TLS stores are handed over as inline PEM; what librdkafka cannot do is refused."""
        out: dict[str, str] = {}
        for key, value in self.values.items():
            if key.startswith(("ssl.", "sasl.", "security.")) or key in COMMAND_OWNED or key in JAVA_DEFAULTS \
                    or key == "bootstrap.servers":  # --bootstrap-server says where, as in Kafka's tools
                continue
            out[key] = value.strip()
        if "security.protocol" in self.values:
            out["security.protocol"] = self.security_protocol.lower()
        if "SSL" in self.security_protocol:
            out |= self._librdkafka_tls()
        if self.sasl:
            mechanism, user, password = self.sasl_credentials()
            out |= {"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
        return out

    def _librdkafka_tls(self) -> dict[str, str]:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
        )

        s = _ssl_settings(self._ssl_values())
        for key, default in (("ssl.enabled.protocols", ["TLSv1.2", "TLSv1.3"]), ("ssl.cipher.suites", [])):
            if key in self.values and sorted(s[key]) != sorted(default):
                raise ClientConfigError(key, "cannot be honoured by librdkafka (odradek perf): remove it")
        if s["ssl.protocol"] not in ("TLSv1.3", "TLS"):
            raise ClientConfigError("ssl.protocol", "cannot be honoured by librdkafka (odradek perf): remove it")
        try:
            out = {"ssl.endpoint.identification.algorithm":
                   "https" if (s["ssl.endpoint.identification.algorithm"] or "").strip().lower() == "https" else "none"}
            certs = load_truststore(s)
            if certs is not None:
                out["ssl.ca.pem"] = "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)
            if s["ssl.keystore.location"] is not None or s["ssl.keystore.key"] is not None:
                store = load_keystore(s)
                out["ssl.key.pem"] = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
                out["ssl.certificate.pem"] = "".join(c.public_bytes(Encoding.PEM).decode() for c in store.chain)
        except ConfigError as e:
            raise ClientConfigError(None, str(e)) from None
        return out


def read_command_config(path: str | Path) -> ClientProperties:
    """A client properties file (ISO-8859-1, as Java's Properties.load reads a file), checked.
    OSError if it cannot be read; ClientConfigError for a key that cannot be honoured."""
    text = Path(path).read_bytes().decode("latin-1")
    try:
        values = parse_properties(text)
    except ValueError as e:
        raise ClientConfigError(None, str(e)) from None
    return ClientProperties({k: v for k, v in values.items()}, origin=str(path))
