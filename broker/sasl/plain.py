"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer with its PlainServerCallbackHandler: one
client message `authzid NUL authcid NUL passwd`, checked against the listener's JAAS
`user_<name>="<password>"` options; the authorization id, when given, must be the user name."""

from __future__ import annotations

import hmac

from broker.sasl.errors import SaslAuthenticationError


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        tokens = response.decode("utf-8", errors="replace").split("\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
