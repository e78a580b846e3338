"""The shipped `config/server.properties` (which the README's `--config` example names) starts a
broker with no unknown-key warning, and its values take effect; every `--config PATH` the README
and docs/cli.md show exists in the repository."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

EXAMPLE = REPO / "config" / "server.properties"


def test_every_config_file_the_docs_name_exists() -> None:
    named = set()
    for doc in ("README.md", "docs/cli.md", "docs/operations.md", "docs/configuration.md"):
        named |= set(re.findall(r"--config (\S+\.properties)", (REPO / doc).read_text()))
    assert named, "the README shows `odradek serve --config ...`"
    assert {p for p in named if not (REPO / p).is_file()} == set()


def test_the_example_server_properties_starts_a_broker(tmp_path: Path) -> None:
    # the test's own --listeners/--log-dirs flags win over the file's, as documented
    b = BrokerProcess(tmp_path / "data", overrides=[f"@{EXAMPLE}"]).start()
    try:
        assert "Unknown configuration" not in b.log_text(), b.log_text()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            cfg = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                         config_filter="all")["broker"]["0"]
        finally:
            admin.close()
    finally:
        b.stop()
    # values of the file that differ from the defaults took effect
    assert cfg["group.initial.rebalance.delay.ms"]["value"] == "0"
    assert cfg["offsets.topic.replication.factor"]["value"] == "1"
    assert (tmp_path / "data" / "meta.properties").is_file()
