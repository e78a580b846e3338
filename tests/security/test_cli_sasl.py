"""`odradek ... --command-config FILE` over SASL_PLAINTEXT and SASL_SSL with a SCRAM user: the Java
client properties a Kafka user has (`sasl.mechanism=SCRAM-SHA-256`, ScramLoginModule in
`sasl.jaas.config`, and for SASL_SSL keytool's PKCS12 truststore) make `topics`, `produce`,
`consume` with a group, `groups describe` (kafka-python) and `perf produce` (librdkafka)
authenticate against a real ZooKeeper-mode broker whose credentials Kafka 3.9.2's kafka-configs
wrote; a wrong password is reported as a refused authentication, not as a broker that is down. One broker serves the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import odradek, rows
from tests.security.scram_broker import SCRAM_LOGIN, ScramNode, scram_broker
from tests.tls_certs import PASSWORD

PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def command_config(node: ScramNode, protocol: str, password: str = "alice-secret") -> Path:
    lines = [f"security.protocol={protocol}", "sasl.mechanism=SCRAM-SHA-256",
             f'sasl.jaas.config={SCRAM_LOGIN} required \\\n    username="alice" \\\n    password="{password}";']
    if protocol == "SASL_SSL":
        lines += ["ssl.truststore.type=PKCS12", f"ssl.truststore.location={node.ca.java_truststore()}",
                  f"ssl.truststore.password={PASSWORD}"]
    path = node.root / f"{protocol}-{password}.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:
    with scram_broker(tmp_path_factory.mktemp("cli-sasl"), "/cli-sasl", ("SCRAM-SHA-256",),
                      {"alice": {"SCRAM-SHA-256": "alice-secret"}}, "num.partitions=1") as node:
        # the broker learns the credential through a /config/changes notification
        cfg = str(command_config(node, "SASL_PLAINTEXT"))
        deadline = time.monotonic() + 30
        while odradek("topics", "list", "--timeout", "3", "--command-config", cfg,
                      bootstrap=node.ports["SASL_PLAINTEXT"]).returncode != 0:
            assert time.monotonic() < deadline, "alice's SCRAM credential never authenticated"
            time.sleep(0.2)
        yield node


def ok(*args: str, bootstrap: str, input: bytes | None = None) -> str:
    r = odradek(*args, bootstrap=bootstrap, input=input)
    assert r.returncode == 0, (args, r.stdout.decode(), r.stderr.decode())
    return r.stdout.decode()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cli_commands_authenticate_with_scram(sasl: ScramNode, protocol: str) -> None:
    b, c = sasl.ports[protocol], ("--command-config", str(command_config(sasl, protocol)))
    topic, group = f"cli-{protocol}".lower(), f"readers-{protocol}".lower()
    ok("topics", "create", topic, "-p", "2", *c, bootstrap=b)
    assert topic in ok("topics", "list", *c, bootstrap=b).split()
    lines = [f"v{i}" for i in range(10)]
    r = odradek("produce", topic, *c, bootstrap=b, input=("\n".join(lines) + "\n").encode())
    assert r.returncode == 0 and "Produced 10 records" in r.stderr.decode(), r.stderr.decode()
    out = ok("consume", topic, "--from-beginning", "-n", "10", "--group", group, *c, bootstrap=b)
    assert sorted(out.splitlines()) == sorted(lines)
    described = rows(ok("groups", "describe", group, *c, bootstrap=b), "GROUP")
    assert sum(int(row[3]) for row in described) == 10 and {row[5] for row in described} == {"0"}, described
    perf = ok("perf", "produce", topic, "-n", "100", "-s", "20", *c, bootstrap=b)
    assert perf.startswith("100 records sent"), perf


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_wrong_password_is_named_as_a_refused_authentication(sasl: ScramNode, protocol: str) -> None:
    """Not `cannot reach a broker`: kafka-python retries a refused authentication until its
    timeout and then reports a timeout; the CLI tells the two apart (clients/common.py)."""
    r = odradek("topics", "list", "--timeout", "5", "--command-config", str(command_config(sasl, protocol, "wrong")),
                bootstrap=sasl.ports[protocol])
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert "refused the connection" in err and "authentication failed" in err.lower(), err
    assert "cannot reach a broker" not in err, err
