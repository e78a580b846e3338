"""The SASL settings of each SASL_PLAINTEXT / SASL_SSL listener, read at start as Kafka reads them:

- `listener.name.<listener>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms` (Kafka's
  default GSSAPI: Kerberos is not built, so a SASL listener with GSSAPI enabled is refused at
  start naming the key to set);
- per mechanism, the JAAS entry `listener.name.<listener>.<mechanism lower case>.sasl.jaas.config`,
  else `sasl.jaas.config`. PLAIN's users are its `user_<name>="<password>"` options; the
  entry's `username` / `password` are the broker's own credentials (inter-broker connections).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.config import LISTENER_PREFIX, ConfigError, KafkaConfig, listener_config
from broker.sasl.authenticator import MechanismServer, SaslAuthenticator
from broker.sasl.client import SaslClientCredentials
from broker.sasl.jaas import JaasConfigError, JaasEntry, parse_jaas_config
from broker.sasl.plain import PlainServer
from broker.sasl.scram import ScramServer

if TYPE_CHECKING:
    from broker.network import KafkaConnection

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# the mechanisms built; Kafka's others (GSSAPI, OAUTHBEARER) are refused at start
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _mechanisms(value: Any) -> list[str]:
    if value is None:
        return ["GSSAPI"]
    if isinstance(value, str):
        return [m.strip() for m in value.split(",") if m.strip()]
    return [str(m).strip() for m in value]


@dataclass(frozen=True)
class ListenerSasl:
    """One SASL listener's enabled mechanisms and their JAAS entries."""

    listener: str
    mechanisms: list[str]
    jaas: dict[str, JaasEntry] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        entry = self.jaas.get("PLAIN")
        if entry is None:
            return {}
        return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}


def jaas_entry(originals: Mapping[str, Any], listener: str, mechanism: str) -> tuple[str, JaasEntry] | None:
    """The JAAS entry for `mechanism` on `listener` and the key it came from (None: not set)."""
    key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = originals.get(key)
    if text is None:
        key, text = "sasl.jaas.config", originals.get("sasl.jaas.config")
    if text is None:
        return None
    try:
        return key, parse_jaas_config(str(text))
    except JaasConfigError as e:
        raise ConfigError(f"Invalid value for configuration {key}: {e}") from e


def listener_sasl(originals: Mapping[str, Any], listener: str) -> ListenerSasl:
    key, raw = listener_config(originals, listener, "sasl.enabled.mechanisms")
    mechanisms = _mechanisms(raw)
    if not mechanisms:
        raise ConfigError(f"Invalid value for configuration {key}: no SASL mechanism enabled on listener {listener}")
    for mech in mechanisms:
        if mech not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"Invalid value {','.join(mechanisms)} for configuration {key}: SASL mechanism {mech} on "
                f"listener {listener} is not supported (Odradek builds {', '.join(SUPPORTED_MECHANISMS)}); "
                f"set {key} (Kafka's default is GSSAPI, which Odradek does not build)")
    jaas: dict[str, JaasEntry] = {}
    for mech in mechanisms:
        found = jaas_entry(originals, listener, mech)
        if found is None:
            raise ConfigError(
                f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the JAAS "
                f"configuration: set {LISTENER_PREFIX}{listener.lower()}.{mech.lower()}.sasl.jaas.config "
                "or sasl.jaas.config")
        key, entry = found
        if mech == "PLAIN" and entry.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(f"Invalid value for configuration {key}: mechanism PLAIN needs login module "
                              f"{PLAIN_LOGIN_MODULE}, not {entry.login_module}")
        jaas[mech] = entry
    return ListenerSasl(listener, mechanisms, jaas)


class SaslListeners:
    """Every SASL listener's settings; built at start, a bad setting refuses it (ConfigError)."""

    def __init__(self, config: KafkaConfig) -> None:
        protocols = config.security_protocols
        self.listeners: dict[str, ListenerSasl] = {
            lst.name: listener_sasl(config.originals, lst.name)
            for lst in config.listeners if protocols.get(lst.name) in SASL_PROTOCOLS}
        self.failed_delay_s = config["connection.failed.authentication.delay.ms"] / 1000
        self.originals = config.originals
        self.max_reauth_ms = int(config["connections.max.reauth.ms"])

    def max_reauth(self, listener: str) -> Callable[[str], int]:
        """connections.max.reauth.ms of each mechanism on `listener`, as Kafka reads it:
        `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, else the broker's."""
        def of(mechanism: str) -> int:
            key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
            value = self.originals.get(key)
            return self.max_reauth_ms if value is None else int(value)

        return of

    def authenticator(self, conn: KafkaConnection) -> SaslAuthenticator | None:
        """A new connection's authenticator (None: not a SASL listener)."""
        settings = self.listeners.get(conn.listener.name)
        if settings is None:
            return None

        def server(mechanism: str) -> MechanismServer:
            if mechanism == "PLAIN":
                return PlainServer(settings.plain_users())
            return ScramServer(mechanism, conn.server.scram_credentials)

        return SaslAuthenticator(conn, settings.mechanisms, server, self.failed_delay_s,
                                 self.max_reauth(conn.listener.name))


def inter_broker_credentials(config: KafkaConfig) -> SaslClientCredentials | None:
    """The broker's own SASL credentials for its connections to other brokers' inter-broker
    listener (None: that listener is not SASL): `sasl.mechanism.inter.broker.protocol`, which
    must be enabled on the listener, and the `username` / `password` options of the listener's
    JAAS entry for it (Kafka's KafkaServer login context)."""
    listener = config.inter_broker_listener_name
    if config.security_protocols.get(listener) not in SASL_PROTOCOLS:
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    settings = listener_sasl(config.originals, listener)
    if mechanism not in settings.mechanisms:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used "
            f"for inter-broker communication ({mechanism} is not enabled on listener {listener})")
    options = settings.jaas[mechanism].options
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"The JAAS entry for {mechanism} on the inter-broker listener {listener} needs the broker's own "
            "username and password options")
    return SaslClientCredentials(mechanism, options["username"], options["password"])
