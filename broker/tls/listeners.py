"""The TLS state of a broker: a server context per SSL listener, the principal mapper, the
client context of the broker's own connections to the inter-broker listener, and the certificate
reload (Kafka's dynamic `listener.name.<l>.ssl.keystore.*` / `ssl.truststore.*`).

Why the SNI callback: asyncio binds a listener to one SSLContext for its life. Each listener's
first context carries an `sni_callback` (OpenSSL calls it on every ClientHello, SNI or not),
which moves the connection being accepted onto the listener's current context. A reload builds
a whole new context in an executor (reading stores is file I/O, and a bad store must change
nothing) and makes it current: handshakes from then on present the new certificate; connections
already established keep theirs, as Kafka's do. `ssl.client.auth` stays what the listener
started with (OpenSSL keeps the accepting context's verify mode). As Kafka with its defaults
`ssl.allow.dn.changes` / `ssl.allow.san.changes` false, the new certificate must have the same
subject and subject alternative names as the one it replaces.

Who may call: the event loop (`reconfigure` awaits the executor).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from cryptography import x509

from broker.config import ConfigError
from broker.tls.contexts import client_context, server_context
from broker.tls.keystores import SslSettings, load_keystore
from broker.tls.principal import ANONYMOUS, SslPrincipalMapper, principal_of_certificate

if TYPE_CHECKING:
    from broker.config import KafkaConfig

__all__ = ["ListenerTls", "TlsListeners"]

log = structlog.get_logger("odradek.tls")

# the settings a reload looks at (Kafka's reconfigurable SSL configs of a listener)
RELOADABLE = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates")


class ListenerTls:
    """One SSL listener's contexts and principal mapping."""

    def __init__(self, settings: SslSettings) -> None:
        self.settings = settings
        try:
            self.mapper = SslPrincipalMapper(settings["ssl.principal.mapping.rules"])
        except ValueError as e:
            raise ConfigError(f"Invalid value {settings['ssl.principal.mapping.rules']!r} for configuration "
                              f"{settings.name('ssl.principal.mapping.rules')}: {e}") from None
        store = load_keystore(settings)
        self.leaf = store.chain[0]
        self.context = server_context(settings, store)  # the one asyncio's server holds
        self.current = self.context
        self.context.sni_callback = self._select_context

    def _select_context(self, ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        if self.current is not self.context:
            ssl_object.context = self.current
        return None

    def principal(self, ssl_object: Any) -> str:
        """`User:<mapped subject>` of the client's verified certificate, ANONYMOUS without one."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        return principal_of_certificate(der, self.mapper)

    def changed(self, settings: SslSettings) -> list[str]:
        return [k for k in RELOADABLE if settings[k] != self.settings[k]]

    def build(self, settings: SslSettings) -> tuple[ssl.SSLContext, x509.Certificate]:
        """A context for `settings` and its certificate, or ConfigError (blocking: file I/O)."""
        store = load_keystore(settings)
        leaf = store.chain[0]
        if leaf.subject != self.leaf.subject:
            raise ConfigError(f"Keystore DistinguishedName does not match: existing={self.leaf.subject.rfc4514_string()}, "
                              f"new={leaf.subject.rfc4514_string()} ({settings.name('ssl.keystore.location')}; "
                              "ssl.allow.dn.changes is false)")
        if _sans(leaf) != _sans(self.leaf):
            raise ConfigError(f"Keystore SubjectAltNames do not match: existing={_sans(self.leaf)}, "
                              f"new={_sans(leaf)} ({settings.name('ssl.keystore.location')}; "
                              "ssl.allow.san.changes is false)")
        return server_context(settings, store), leaf

    async def reconfigure(self, settings: SslSettings) -> bool:
        """Make new handshakes use `settings`' stores when they changed; True if reloaded.
        ConfigError (nothing changed) when the new stores cannot be used."""
        changed = self.changed(settings)
        if not changed:
            return False
        context, leaf = await asyncio.get_running_loop().run_in_executor(None, self.build, settings)
        self.current, self.leaf = context, leaf
        self.settings = settings
        log.info("reloaded the listener's keystore and truststore; new connections use them",
                 listener=settings.listener, changed=[settings.name(k) for k in changed])
        return True


class TlsListeners:
    """See the module docstring. Built at start: a bad store refuses the start (ConfigError)."""

    def __init__(self, config: KafkaConfig) -> None:
        protocols = config.security_protocols
        self.listeners: dict[str, ListenerTls] = {
            lst.name: ListenerTls(SslSettings.of(config.originals, lst.name))
            for lst in config.listeners if protocols.get(lst.name) in ("SSL", "SASL_SSL")}
        self._client_contexts: dict[str, ssl.SSLContext | None] = {}
        self._protocols = protocols
        self._originals = config.originals
        # the broker's own connections go to the inter-broker listener: built now, so a bad
        # truststore refuses the start instead of failing every replica fetch
        self.client_context(config.inter_broker_listener_name)

    def server_context(self, listener: str) -> ssl.SSLContext | None:
        tls = self.listeners.get(listener)
        return None if tls is None else tls.context

    def client_context(self, listener: str) -> ssl.SSLContext | None:
        """The context for connecting to other brokers' `listener` (None: PLAINTEXT)."""
        if listener not in self._client_contexts:
            ctx = None
            if self._protocols.get(listener) in ("SSL", "SASL_SSL"):
                ctx = client_context(SslSettings.of(self._originals, listener))
            self._client_contexts[listener] = ctx
        return self._client_contexts[listener]

    async def validate(self, originals: Mapping[str, Any]) -> None:
        """ConfigError if a listener's changed stores in `originals` cannot be used (an
        AlterConfigs is refused before it is stored)."""
        loop = asyncio.get_running_loop()
        for name, tls in self.listeners.items():
            settings = SslSettings.of(originals, name)
            if tls.changed(settings):
                await loop.run_in_executor(None, tls.build, settings)

    async def reconfigure(self, originals: Mapping[str, Any]) -> None:
        """Dynamic broker configs changed: reload each listener whose stores changed. A store
        that cannot be used is logged and the listener keeps its certificate."""
        for name, tls in self.listeners.items():
            try:
                await tls.reconfigure(SslSettings.of(originals, name))
            except (ConfigError, ssl.SSLError, OSError) as e:
                log.error("the listener keeps its certificate: the new keystore or truststore cannot be used",
                          listener=name, error=str(e))


def _sans(cert: x509.Certificate) -> list[str]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return sorted(str(n.value) for n in names)
