"""SASL/SCRAM's server side against RFC 7677's example exchange (SCRAM-SHA-256, user `user`,
password `pencil`) and its failures; the credential's ZooKeeper text form round-trips."""

from __future__ import annotations

import base64

import pytest

from broker.sasl.errors import SaslError
from broker.sasl.scram import CredentialCache, ScramCredential, ScramServer, credential

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def cache(iterations: int = 4096) -> CredentialCache:
    c = CredentialCache()
    c.update_user("user", {"SCRAM-SHA-256": credential("SCRAM-SHA-256", "pencil", iterations, SALT).to_zk()})
    return c


def test_rfc7677_exchange() -> None:
    s = ScramServer("SCRAM-SHA-256", cache(), SERVER_NONCE)
    assert s.evaluate(CLIENT_FIRST) == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert s.evaluate(CLIENT_FINAL) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert s.complete and s.authorization_id == "user"


@pytest.mark.parametrize("first, final, needle", [
    (CLIENT_FIRST, CLIENT_FINAL.replace(b"p=dHz", b"p=eHz"), "Invalid client credentials"),
    (CLIENT_FIRST, CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"), "nonce"),
    (b"n,,n=nobody,r=abc", None, "Invalid user credentials"),
    (b"n,a=other,n=user,r=abc", None, "authorization id"),
    (b"p=tls-server-end-point,,n=user,r=abc", None, "format"),
    (b"n,,n=user,r=abc,tokenauth=true", None, "Delegation token"),
], ids=["bad-proof", "bad-nonce", "unknown-user", "authzid", "channel-binding", "tokenauth"])
def test_failures(first: bytes, final: bytes | None, needle: str) -> None:
    s = ScramServer("SCRAM-SHA-256", cache(), SERVER_NONCE)
    with pytest.raises(SaslError, match=needle):
        s.evaluate(first)
        assert final is not None
        s.evaluate(final)
    assert not s.complete


def test_iterations_below_the_minimum_refused() -> None:
    with pytest.raises(SaslError, match="Iterations 1000 is less than the minimum 4096 for SCRAM-SHA-256"):
        ScramServer("SCRAM-SHA-256", cache(1000)).evaluate(CLIENT_FIRST)


def test_credential_text_round_trips_and_users_are_replaced_whole() -> None:
    cred = credential("SCRAM-SHA-512", "pw", 8192)
    assert ScramCredential.from_zk(cred.to_zk()) == cred
    assert cred.to_zk().startswith("salt=") and cred.to_zk().endswith(",iterations=8192")
    c = CredentialCache()
    c.update_user("a", {"SCRAM-SHA-512": cred.to_zk(), "SCRAM-SHA-256": "garbage"})
    assert c.get("SCRAM-SHA-512", "a") == cred and c.get("SCRAM-SHA-256", "a") is None
    c.update_user("a", {})
    assert c.get("SCRAM-SHA-512", "a") is None
