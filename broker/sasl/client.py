"""The client side of SASL for the broker's own connections to other brokers (Kafka's
SaslClientAuthenticator, with `sasl.mechanism.inter.broker.protocol` and the credentials of the
inter-broker listener's JAAS entry, its `username` / `password` options): a token exchange the
network client drives with SaslHandshake v1 and SaslAuthenticate requests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from broker.sasl.scram import hash_name


class SaslClientError(Exception):
    """The server's answer does not fit the exchange (a wrong server signature, a foreign nonce)."""


@dataclass(frozen=True)
class SaslClientCredentials:
    mechanism: str
    username: str
    password: str

    def exchange(self) -> PlainClient | ScramClient:
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        """The next token to send (None: done)."""
        if challenge is None:
            return self._token
        self.complete = True
        return None


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._h = hash_name(mechanism)
        self._password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = base64.b64encode(os.urandom(24)).decode().rstrip("=")
        self._bare = f"n={name},r={self._nonce}"
        self._state = 0
        self._expected_signature = b""
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            self._state = 1
            return f"n,,{self._bare}".encode()
        assert challenge is not None
        if self._state == 1:
            self._state = 2
            server_first = challenge.decode()
            attrs = dict(a.split("=", 1) for a in server_first.split(",") if "=" in a)
            nonce = attrs.get("r", "")
            if not nonce.startswith(self._nonce) or "s" not in attrs or "i" not in attrs:
                raise SaslClientError("Invalid SCRAM server first message")
            salted = hashlib.pbkdf2_hmac(self._h, self._password.encode(), base64.b64decode(attrs["s"]),
                                         int(attrs["i"]))
            client_key = hmac.new(salted, b"Client Key", self._h).digest()
            stored_key = hashlib.new(self._h, client_key).digest()
            without_proof = f"c=biws,r={nonce}"
            auth = f"{self._bare},{server_first},{without_proof}".encode()
            signature = hmac.new(stored_key, auth, self._h).digest()
            proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
            server_key = hmac.new(salted, b"Server Key", self._h).digest()
            self._expected_signature = hmac.new(server_key, auth, self._h).digest()
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if challenge != b"v=" + base64.b64encode(self._expected_signature):
            raise SaslClientError("Invalid SCRAM server signature")
        self.complete = True
        return None
