"""`odradek ... --command-config FILE` over TLS against a real broker: the Kafka client properties
file a Java client would take (keytool's PKCS12 truststore, a PKCS12 or inline PEM keystore for
mutual TLS) drives every client the CLI builds -- kafka-python admin, producer and consumer, and
librdkafka for `perf` -- and nothing reaches the SSL listeners without it.

The broker is test_tls_clients' (PLAINTEXT, SSL with server authentication, MTLS requiring a
client certificate), started for this module."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess, free_port
from tests.integration import test_tls_clients
from tests.integration.test_cli import odradek, rows
from tests.integration.test_tls_clients import TlsBroker
from tests.subprocesses import reaped
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

tls = test_tls_clients.tls  # the module's broker (module scope: one per test module)


def properties_file(path: Path, lines: list[str]) -> Path:
    path.write_text("# written as a Java client's config\n" + "\n".join(lines) + "\n", encoding="latin-1")
    return path


def inline_pem(pem: str) -> str:
    """A PEM text as one properties value continued over lines, as users write it."""
    return "\\n\\\n    ".join(pem.strip().splitlines())


def ok(*args: str, bootstrap: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
    r = odradek(*args, bootstrap=bootstrap, input=input, env=env)
    assert r.returncode == 0, (args, r.stdout.decode(), r.stderr.decode())
    return r.stdout.decode()


def test_every_client_of_the_cli_speaks_ssl_from_a_command_config(tls: TlsBroker, tmp_path: Path) -> None:
    """topics, produce, consume (with a group), groups describe and configs describe over the
    SSL listener with keytool's PKCS12 truststore; the same file through $ODRADEK_COMMAND_CONFIG;
    without it, the SSL listener is not reached."""
    cfg = properties_file(tmp_path / "ssl.properties", [
        "security.protocol=SSL",
        f"ssl.truststore.location={tls.ca.java_truststore()}",
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.password={PASSWORD}",
        "client.id=ops",
        "request.timeout.ms : 15000",
    ])
    b, c = tls.ssl, ("--command-config", str(cfg))
    assert ok("topics", "create", "cc-ssl", "-p", "2", *c, bootstrap=b) == "Created topic cc-ssl.\n"
    assert "cc-ssl" in ok("topics", "list", *c, bootstrap=b).split()
    lines = [f"k{i}:v{i}" for i in range(20)]
    r = odradek("produce", "cc-ssl", "-K", ":", *c, bootstrap=b, input=("\n".join(lines) + "\n").encode())
    assert r.returncode == 0 and "Produced 20 records" in r.stderr.decode(), r.stderr.decode()
    out = ok("consume", "cc-ssl", "--from-beginning", "-n", "20", "--group", "cc-readers", "--print-key", *c,
             bootstrap=b)
    assert sorted(out.splitlines()) == sorted(line.replace(":", "\t") for line in lines)

    described = rows(ok("groups", "describe", "cc-readers", *c, bootstrap=b), "GROUP")
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: every record committed, no lag
    assert {row[1] for row in described} == {"cc-ssl"}, described
    assert sum(int(row[3]) for row in described) == 20 and {row[5] for row in described} == {"0"}, described
    from_env = ok("configs", "describe", "--topic", "cc-ssl", bootstrap=b,
                  env={"ODRADEK_COMMAND_CONFIG": str(cfg)})
    assert "cc-ssl" in from_env

    r = odradek("topics", "list", "--timeout", "3", bootstrap=b)
    assert r.returncode != 0 and "Traceback" not in r.stderr.decode(), r.stderr.decode()


def test_mutual_tls_with_pkcs12_and_inline_pem_keystores(tls: TlsBroker, tmp_path: Path) -> None:
    """The MTLS listener refuses a client without a certificate; a PKCS12 keystore, or a PEM
    keystore given inline (continued lines, an encrypted key and ssl.key.password), gets in for
    the kafka-python commands and for `perf` (librdkafka, the stores handed over as inline PEM)."""
    b = tls.mtls
    no_cert = properties_file(tmp_path / "no-cert.properties", [
        "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={tls.ca.ca_file()}"])
    r = odradek("topics", "list", "--timeout", "3", "--command-config", str(no_cert), bootstrap=b)
    assert r.returncode != 0 and "Traceback" not in r.stderr.decode(), r.stderr.decode()

    pkcs12 = properties_file(tmp_path / "pkcs12.properties", [
        "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={tls.ca.ca_file()}",
        "ssl.keystore.type=PKCS12", f"ssl.keystore.location={tls.client.pkcs12_file()}",
        f"ssl.keystore.password={PASSWORD}"])
    inline = properties_file(tmp_path / "inline.properties", [
        "security.protocol=SSL",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.certificates={inline_pem(tls.ca.cert_pem)}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.certificate.chain={inline_pem(tls.client.cert_pem)}",
        f"ssl.keystore.key={inline_pem(tls.client.key_pem(PASSWORD))}",
        f"ssl.key.password={PASSWORD}",
        "ssl.enabled.protocols=TLSv1.2,TLSv1.3",
    ])
    ok("topics", "create", "cc-mtls", "--command-config", str(pkcs12), bootstrap=b)
    r = odradek("produce", "cc-mtls", "--command-config", str(inline), bootstrap=b, input=b"a\nb\nc\n")
    assert r.returncode == 0, r.stderr.decode()
    out = ok("consume", "cc-mtls", "--from-beginning", "-n", "3", "--command-config", str(pkcs12), bootstrap=b)
    assert out.splitlines() == ["a", "b", "c"]

    perf = ok("perf", "produce", "cc-mtls", "-n", "200", "-s", "50", "--command-config", str(inline), bootstrap=b)
    assert perf.startswith("200 records sent"), perf
    perf = ok("perf", "consume", "cc-mtls", "-n", "203", "--hide-header", "--command-config", str(pkcs12),
              bootstrap=b)
    assert perf.strip(), perf


def test_a_broker_certificate_the_truststore_does_not_trust_is_named(tls: TlsBroker, tmp_path: Path) -> None:
    """A truststore of another CA: the TLS handshake fails, and the error says so (kafka-python
    alone would report a bootstrap timeout, which read as a broker that is down)."""
    other = CertificateAuthority(tmp_path / "other-ca", cn="Another CA")
    cfg = properties_file(tmp_path / "other.properties", [
        "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={other.ca_file()}"])
    r = odradek("topics", "list", "--timeout", "3", "--command-config", str(cfg), bootstrap=tls.ssl)
    err = r.stderr.decode()
    assert r.returncode == 1 and "refused the connection" in err and "CERTIFICATE_VERIFY_FAILED" in err, err
    assert "cannot reach a broker" not in err, err


def test_a_key_the_cli_cannot_honour_is_refused_naming_it(tls: TlsBroker, tmp_path: Path) -> None:
    """Before any connection: a JKS truststore (naming PKCS12/PEM), a Kerberos mechanism, an ssl
    key under PLAINTEXT; exit 2 with the file and the key named."""
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(64))
    cases = {
        "ssl.truststore.location": ["security.protocol=SSL", f"ssl.truststore.location={jks}"],
        "sasl.mechanism": ["security.protocol=SASL_SSL", "sasl.mechanism=GSSAPI"],
        "ssl.keystore.location": [f"ssl.keystore.location={tls.client.pkcs12_file()}"],
        "ssl.provider": ["security.protocol=SSL", "ssl.provider=SunJSSE"],
    }
    for key, lines in cases.items():
        cfg = properties_file(tmp_path / f"{key}.properties", lines)
        r = odradek("topics", "list", "--command-config", str(cfg), bootstrap=tls.ssl)
        err = r.stderr.decode()
        assert r.returncode == 2 and key in err and str(cfg) in err and "Traceback" not in err, err
    assert "PKCS12" in odradek("topics", "list", "--command-config", str(tmp_path / "ssl.truststore.location.properties"),
                               bootstrap=tls.ssl).stderr.decode()


def test_topics_reassign_and_groups_describe_watch_over_ssl(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """The two commands that reach a broker and came beside this option: `topics reassign`
    (ZooKeeper mode only; a plan keeping the partition on its broker, throttled, so the throttle
    configs are set and cleared over the same connection) and `groups describe --watch` (piped:
    snapshots with the group's lag row; Ctrl-C exits 0) against a broker whose SSL listener is
    the only one the file reaches."""
    ca = CertificateAuthority(tmp_path / "certs")
    plain, ssl_port = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data", port=plain, zookeeper_connect=zookeeper.connect_string("/cc"), broker_id=0,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        overrides=["offsets.topic.replication.factor=1", "group.initial.rebalance.delay.ms=0",
                   "ssl.keystore.type=PKCS12", f"ssl.keystore.location={ca.issue('broker', 'broker0').pkcs12_file()}",
                   f"ssl.keystore.password={PASSWORD}"]).start()
    try:
        cfg = properties_file(tmp_path / "ssl.properties", [
            "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={ca.ca_file()}"])
        b, c = f"127.0.0.1:{ssl_port}", ("--command-config", str(cfg))
        ok("topics", "create", "cc-moves", "-p", "1", "-r", "1", *c, bootstrap=b)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "cc-moves", "partition": 0,
                                                                    "replicas": [0]}]}))
        out = ok("topics", "reassign", "--reassignment-json-file", str(plan), "--throttle", "100000", *c,
                 bootstrap=b)
        assert "Reassignment of 1 partition(s) completed" in out, out
        throttles = ok("configs", "describe", "--broker", "0", *c, bootstrap=b)
        assert "replication.throttled.rate" not in throttles, throttles

        r = odradek("produce", "cc-moves", *c, bootstrap=b, input=b"a\nb\nc\n")
        assert r.returncode == 0, r.stderr.decode()
        ok("consume", "cc-moves", "--from-beginning", "-n", "2", "--group", "cc-watchers", *c, bootstrap=b)
        lag_row = re.compile(r"cc-watchers\s+cc-moves\s+0\s+2\s+3\s+1\s")
        out_path = tmp_path / "watch.out"
        env = {**os.environ, "COLUMNS": "200", "ODRADEK_BOOTSTRAP": b}
        with out_path.open("wb") as out_file:
            proc = subprocess.Popen([sys.executable, "-m", "clients.cli", "groups", "describe", "cc-watchers",
                                     "--watch", "--interval", "0.3", *c], cwd=REPO, env=env, stdout=out_file,
                                    stderr=subprocess.PIPE)
        with reaped(proc):
            deadline = time.monotonic() + 30
            while len(lag_row.findall(out_path.read_text())) < 2:  # two snapshots, each over SSL
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, out_path.read_text()
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(20) == 0
    finally:
        broker.stop()
