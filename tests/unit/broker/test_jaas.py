"""Kafka's JAAS syntax (broker/sasl/jaas.py), one parser for the broker's listeners and the CLI's
client properties: Kafka's JaasConfig accepts it, and its error messages never repeat a value."""

from __future__ import annotations

import pytest

from broker.sasl.jaas import JaasConfigError, parse_jaas_config

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_jaas_entry_is_parsed_as_kafkas_jaas_config() -> None:
    """Comments as Java's StreamTokenizer skips them, both quote characters with escapes, bare
    words, a flag in any case."""
    entry = parse_jaas_config(f'{SCRAM} required username="alice" /* c */ password="a\\"b;c" // end\n;')
    assert (entry.login_module, entry.flag, entry.options) == (SCRAM, "required", {"username": "alice", "password": 'a"b;c'})
    assert parse_jaas_config(f"{PLAIN} REQUIRED username=bob password='x y';").options == {"username": "bob", "password": "x y"}
    assert parse_jaas_config(f'{PLAIN} required user_a="line\\nnext";').options == {"user_a": "line\nnext"}


@pytest.mark.parametrize("bad, why", [
    (f'{SCRAM} required username="a"', "not terminated by semi-colon"),
    (f'{SCRAM} username="secret";', "Invalid login module control flag 'username'"),
    (f'{SCRAM};', "control flag not specified"),
    (f'{SCRAM} required; {PLAIN} required;', "contains 2 login modules, should be 1 module"),
    ("", "does not contain any login modules"),
    ("// only a comment", "does not contain any login modules"),
    (f'{SCRAM} required username "secret";', "expected key=value"),
    (f'{SCRAM} required password="secret', "unterminated quoted value"),
    (f'{SCRAM} required /* password="secret";', "unterminated /\\* comment"),
])
def test_what_kafka_refuses_is_refused_without_the_values(bad: str, why: str) -> None:
    with pytest.raises(JaasConfigError, match=why) as e:
        parse_jaas_config(bad)
    assert "secret" not in str(e.value)
