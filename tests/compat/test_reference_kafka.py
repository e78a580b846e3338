"""The reference broker itself: it starts from the jars, answers a real client, and stops."""

from __future__ import annotations

from tests.compat.jvm import kafka_version, run_tool
from tests.compat.reference_kafka import ReferenceKafka


def test_reference_kafka_answers_api_versions(reference_kafka: ReferenceKafka) -> None:
    out = run_tool("kafka.admin.BrokerApiVersionsCommand", "--bootstrap-server",
                   reference_kafka.bootstrap).stdout
    assert out.startswith(f"{reference_kafka.bootstrap} (id: 1 rack: null)")
    assert "Produce(0): 0 to 11 [usable: 11]" in out
    assert kafka_version().startswith("3.9.")
