"""What the Docker image runs, as host processes: `odradek serve --config-env` configured by
KAFKA_* variables, and the HEALTHCHECK probe (`python -m broker.healthcheck`) against it.
tests/compose/ runs the same inside containers."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess, free_port

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic


def healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.healthcheck", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=30, env={**os.environ, **(env or {})})


def test_kafka_variables_configure_the_broker_and_the_probe_sees_it(tmp_path: Path):
    """--config file < KAFKA_* variables < --override, as docs/configuration.md says."""
    env = {"KAFKA_BROKER_ID": "7", "KAFKA_NUM_PARTITIONS": "4", "KAFKA_HEAP_OPTS": "-Xmx1G",
           "KAFKA_LOG_RETENTION_MS": "111111"}
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\nlog.retention.ms=222222\nlog.segment.bytes=5000000\n")
    broker = BrokerProcess(tmp_path / "data", env=env, serve_args=["--config-env"],
                           overrides=[f"@{properties}", "log.retention.ms=333333"]).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics([NewTopic("from-env", -1, -1)])
            assert len(admin.describe_topics(["from-env"])[0]["partitions"]) == 4  # env over file
            res = ConfigResource(ConfigResourceType.BROKER, "7")
            configs = admin.describe_configs([res], config_filter="all")["broker"]["7"]
            assert configs["log.retention.ms"]["value"] == "333333"  # --override over env
            assert configs["log.segment.bytes"]["value"] == "5000000"  # the file where nothing else sets it
        finally:
            admin.close()
        ok = healthcheck(broker.bootstrap, env=env)  # KAFKA_BROKER_ID: it must list broker 7
        assert ok.returncode == 0 and ok.stdout.strip() == "healthy: brokers [7], controller 7", ok
        other = healthcheck(broker.bootstrap, "--broker-id", "8")
        assert other.returncode == 1 and "broker 8 is not among the live brokers [7]" in other.stdout
        listeners = {"KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{broker.port}"}  # the image's default way
        assert healthcheck(env=listeners).returncode == 0
        log = broker.log_text()
        assert "configs from KAFKA_* environment variables" in log and "num.partitions" in log
        assert "heap.opts" not in log  # a JVM variable is not a config
    finally:
        broker.stop()


def test_probe_fails_with_the_reason_when_nothing_listens():
    result = healthcheck(f"127.0.0.1:{free_port()}")
    assert result.returncode == 1 and result.stdout.startswith("unhealthy: 127.0.0.1:")
