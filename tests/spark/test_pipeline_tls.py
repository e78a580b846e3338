"""`odradek pipeline clickstream --command-config FILE` against an SSL listener, with the `odradek`
source and with Spark's own `kafka` connector: the same Java client properties (keytool's PKCS12
truststore) reach the pipeline's kafka-python admin and producer and, as `kafka.*` options, both
Spark sources (the odradek source's TLS context rebuilt on Spark's Python workers). The counts
printed are the generator's, as in test_pipeline's plaintext run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_connector.pipelines import clickstream
from tests.broker_process import BrokerProcess, free_port
from tests.integration.test_cli import odradek
from tests.spark.helpers import ADMISSION_CONTROL
from tests.tls_certs import PASSWORD, CertificateAuthority

START_MS = 1_700_000_000_000


@pytest.fixture
def ssl_broker(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A broker of one test's own (the command uses fixed topic names) whose clients must use
    its SSL listener, and the client properties file for it."""
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", "broker0")
    plain, ssl_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain,
                      listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
                      overrides=["num.partitions=1", "ssl.keystore.type=PKCS12",
                                 f"ssl.keystore.location={server.pkcs12_file()}",
                                 f"ssl.keystore.password={PASSWORD}"]).start()
    cfg = tmp_path / "client.properties"
    cfg.write_text(f"security.protocol=SSL\nssl.truststore.type=PKCS12\n"
                   f"ssl.truststore.location={ca.java_truststore()}\nssl.truststore.password={PASSWORD}\n")
    try:
        yield f"127.0.0.1:{ssl_port}", cfg
    finally:
        b.stop()


@pytest.mark.skipif(not ADMISSION_CONTROL, reason=(
    "PySpark < 4.2 runs AvailableNow as a single batch for Python sources: no window closes"))
@pytest.mark.parametrize("source", clickstream.SOURCES)
def test_pipeline_over_ssl_from_a_command_config(ssl_broker: tuple[str, Path], tmp_path: Path, source: str) -> None:
    bootstrap, cfg = ssl_broker
    expected = clickstream.expected_counts(clickstream.generate_clicks(600, START_MS, spacing_ms=100))
    proc = odradek("pipeline", "clickstream", "--bootstrap-server", bootstrap, "--command-config", str(cfg),
                   "--available-now", "--events", "600", "--output", str(tmp_path / "out"), "--source", source,
                   timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    lines = proc.stdout.decode().strip().splitlines()
    assert lines[-1] == f"{sum(expected.values())} clicks counted in finished windows", lines
