"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ScramSaslServer, and the
credentials it checks (Kafka's CredentialCache, fed from ZooKeeper's `/config/users/<user>`).

Exchange: client-first `n,[a=<authzid>],n=<user>,r=<nonce>[,<ext>=<v>...]` -> server-first
`r=<client nonce><server nonce>,s=<salt b64>,i=<iterations>` -> client-final
`c=<binding b64>,r=<nonce>,p=<proof b64>` -> server-final `v=<server signature b64>`. The client
proof is checked as RFC 5802 says: H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey. Every
failure is a SaslError (its text stays in the broker's log; the client gets Kafka's generic
"Authentication failed during authentication due to invalid credentials with SASL mechanism ...").
Extensions other than Kafka's `tokenauth` are ignored, as Kafka ignores them; `tokenauth=true`
(delegation tokens) is refused: delegation tokens are not built.

A credential is stored as Kafka's ScramCredentialUtils writes it:
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from broker.sasl.errors import SaslError

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations of both
MAX_ITERATIONS = 16384  # AlterUserScramCredentials' bound (ScramMechanism.maxIterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_zk(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @staticmethod
    def from_zk(text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return ScramCredential(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ValueError(f"invalid SCRAM credential: missing or bad {e}") from None


def hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism]


def credential(mechanism: str, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
    """The credential of `password` (Kafka's ScramFormatter.generateCredential)."""
    h = hash_name(mechanism)
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), server_key, iterations)


class CredentialCache:
    """SCRAM credentials by mechanism and user name (Kafka's CredentialCache): replaced whole per
    user by the users config handler at start and on every /config/changes notification."""

    def __init__(self) -> None:
        self._creds: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._creds.get(mechanism, {}).get(user)

    def update_user(self, user: str, config: dict[str, str]) -> list[str]:
        """Set `user`'s credentials from its config overrides; the mechanisms whose value did not
        parse (left out)."""
        bad: list[str] = []
        for mechanism, creds in self._creds.items():
            text = config.get(mechanism)
            creds.pop(user, None)
            if text is None:
                continue
            try:
                creds[user] = ScramCredential.from_zk(text)
            except ValueError:
                bad.append(mechanism)
        return bad

    def users(self, mechanism: str) -> dict[str, ScramCredential]:
        return dict(self._creds.get(mechanism, {}))


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslError(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    def __init__(self, mechanism: str, credentials: CredentialCache, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce  # tests: RFC 7677's example exchange
        self._h = hash_name(mechanism)
        self._credentials = credentials
        self.complete = False
        self.authorization_id: str | None = None
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._username = ""
        self._cred: ScramCredential | None = None

    def evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
            return self._client_first(text)
        if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
            return self._client_final(text)
        raise SaslError(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        gs2, sep, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if gs2 != "n" or not sep or not sep2 or (authz and not authz.startswith("a=")):
            raise SaslError("Invalid SCRAM client first message format")
        attrs = bare.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r=") or len(attrs[1]) < 3:
            raise SaslError("Invalid SCRAM client first message format")
        username = _saslname(attrs[0][2:])
        extensions = dict(a.split("=", 1) for a in attrs[2:] if "=" in a)
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslError("Delegation token authentication is not supported")
        cred = self._credentials.get(self.mechanism, username)
        if cred is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if authz and _saslname(authz[2:]) != username:
            raise SaslError("Authentication failed: Client requested an authorization id that is different from username")
        if cred.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {cred.iterations} is less than the minimum {MIN_ITERATIONS} for {self.mechanism}")
        self._username = username
        self._cred = cred
        self._client_first_bare = bare
        # Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36
        server_nonce = self._server_nonce or _base36(int.from_bytes(os.urandom(17)) >> 6)
        self._nonce = attrs[1][2:] + server_nonce
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "FAILED"
        without_proof, sep, proof = text.rpartition(",p=")
        attrs = without_proof.split(",")
        if not sep or len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise SaslError("Invalid SCRAM client final message format")
        # Kafka checks only that the nonce ends with the server's (ScramSaslServer): librdkafka
        # before 2.1 repeats its own nonce in front of it
        if not attrs[1][2:].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        assert self._cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise SaslError("Invalid client credentials") from None
        signature = hmac.new(self._cred.stored_key, auth_message, self._h).digest()
        if len(client_proof) != len(signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._h, client_key).digest(), self._cred.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = hmac.new(self._cred.server_key, auth_message, self._h).digest()
        self._state = "COMPLETE"
        self.complete = True
        self.authorization_id = self._username
        return b"v=" + base64.b64encode(server_signature)
