"""Kafka 3.9's broker config keys as its own broker describes them, for
broker/kafka_broker_configs.json: every key of KafkaConfig with its ConfigDef type, default,
read-only flag (not in DynamicBrokerConfig.AllDynamicConfigs), sensitivity and documentation.

`describe(port)` asks a running Kafka 3.9 broker (DescribeConfigs v4 of its own broker
resource, with synonyms and documentation): the default is the DEFAULT_CONFIG synonym, which
is there even for the keys the reference's server.properties sets. Run as a script to write the
table again from a fresh reference broker:
`python -m tests.compat.kafka_broker_configs` (cwd = the worktree)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from broker.kafka_broker_configs import TABLE_PATH
from protocol.messages import DescribeConfigsRequest
from protocol.messages import describe_configs_request as dcq
from tests.compat.reference_kafka import ReferenceKafka
from tests.raw_client import call_once

TYPE_NAMES = {1: "bool", 2: "string", 3: "int", 4: "short", 5: "long", 6: "double", 7: "list", 8: "class",
              9: "password"}
DEFAULT_CONFIG = 5


def describe_configs(port: int, broker_id: str, documentation: bool = False) -> list[Any]:
    """DescribeConfigs v4 of broker `broker_id` with synonyms: its config entries."""
    req = DescribeConfigsRequest(
        resources=[dcq.DescribeConfigsResource(resource_type=4, resource_name=broker_id, configuration_keys=None)],
        include_synonyms=True, include_documentation=documentation)
    (result,) = call_once(port, 32, 4, req).results
    assert result.error_code == 0, result
    return list(result.configs)


def describe(port: int, broker_id: str = "1") -> list[dict[str, Any]]:
    """The broker's own description of its keys, one entry per key, sorted by name."""
    keys = []
    for c in describe_configs(port, broker_id, documentation=True):
        defaults = [s.value for s in c.synonyms if s.source == DEFAULT_CONFIG and s.name == c.name]
        keys.append({"name": c.name, "type": TYPE_NAMES.get(c.config_type, "unknown"),
                     "default": defaults[0] if defaults else None, "read_only": c.read_only,
                     "sensitive": c.is_sensitive, "doc": c.documentation or ""})
    return sorted(keys, key=lambda k: k["name"])


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        kafka = ReferenceKafka(Path(work)).start()
        try:
            keys = describe(kafka.port)
        finally:
            kafka.stop()
    TABLE_PATH.write_text(json.dumps(keys, indent=0, sort_keys=True) + "\n")
    print(f"{len(keys)} keys written to {TABLE_PATH}", file=sys.stderr)


if __name__ == "__main__":
    main()
