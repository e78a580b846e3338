"""/metrics of a live single-node broker (metrics.port), scraped over HTTP and parsed with
prometheus-client's parser: the BrokerTopicMetrics counters match the records a real client
produced and fetched, and the replica-manager and controller gauges describe the node."""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.metrics.request_metrics import PHASES
from tests.broker_process import FAST_GROUPS, BrokerProcess, free_port
from tests.integration.test_clients import consume_all, create_topic
from tests.metrics_scrape import scrape, series, value

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition


DOCS = Path(__file__).resolve().parents[2] / "docs"


def queried_names() -> set[str]:
    """Series names in docs/grafana/odradek.json's queries and docs/prometheus/odradek-alerts.yml."""
    dashboard = json.loads((DOCS / "grafana" / "odradek.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs.append((DOCS / "prometheus" / "odradek-alerts.yml").read_text())
    names = {n for e in exprs for n in re.findall(r"\b(?:kafka|odradek|process)_[a-z_]+", e)}
    assert len(names) > 20
    return names


@pytest.fixture
def mbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=["num.partitions=1", f"metrics.port={free_port()}",
                                                    "metrics.host=127.0.0.1", "log.flush.interval.messages=1"])
    b.metrics_port = int(b.overrides[1].split("=")[1])
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_topic_counters_match_records_produced_and_fetched(mbroker: BrokerProcess) -> None:
    port = mbroker.metrics_port
    before = scrape("127.0.0.1", port)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total") == 0
    assert value(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1

    create_topic(mbroker, "m", 3)
    n = 500
    producer = KafkaProducer(bootstrap_servers=mbroker.bootstrap, acks="all", linger_ms=5)
    for i in range(n):
        producer.send("m", f"record-{i}".encode(), partition=i % 3)
    producer.flush()
    producer.close()
    after_produce = scrape("127.0.0.1", port)
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") == n
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total") == n
    sizes = series(after_produce, "kafka_log_log_size")
    log_bytes = sum(v for labels, v in sizes.items() if dict(labels)["topic"] == "m")
    assert len([1 for labels in sizes if dict(labels)["topic"] == "m"]) == 3
    # every appended batch is in the log (no retention ran): bytes in == the log's bytes
    assert value(after_produce, "kafka_server_brokertopicmetrics_bytesin_total", topic="m") == log_bytes > 0
    assert value(after_produce, "kafka_server_brokertopicmetrics_bytesout_total", topic="m") == 0

    assert len(consume_all(mbroker, "m", 3, n)) == n
    # a fetch at the log end waits fetch.max.wait.ms in the purgatory: remote time
    idle = KafkaConsumer(bootstrap_servers=mbroker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=300)
    idle.assign([TopicPartition("m", 0)])
    idle.seek_to_end()
    assert not idle.poll(timeout_ms=1500)
    idle.close()
    after_fetch = scrape("127.0.0.1", port)
    # each batch read once by the consumer
    assert value(after_fetch, "kafka_server_brokertopicmetrics_bytesout_total", topic="m") == log_bytes
    assert value(after_fetch, "kafka_server_brokertopicmetrics_bytesout_total") == log_bytes

    partitions = value(after_fetch, "kafka_server_replicamanager_partitioncount")
    assert partitions >= 3
    assert value(after_fetch, "kafka_server_replicamanager_leadercount") == partitions
    assert value(after_fetch, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after_fetch, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after_fetch, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") >= 0
    assert value(after_fetch, "process_open_fds") > 0
    # one Produce per batch at most; the consumer's Fetches waited in the purgatory at the end
    produces = value(after_fetch, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert 1 <= produces <= n
    assert value(after_fetch, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
    fetches = value(after_fetch, "kafka_network_requestmetrics_requests_total", request="Fetch")
    assert fetches >= 1
    assert value(after_fetch, "kafka_network_requestmetrics_remotetimems_count", request="Fetch") == fetches
    assert value(after_fetch, "kafka_network_requestmetrics_remotetimems_sum", request="Fetch") >= 250
    assert value(after_fetch, "kafka_network_requestmetrics_totaltimems_bucket", request="Metadata", le="+Inf") >= 1
    # every phase of Kafka's RequestMetrics, the response queue and send included, per response
    for phase in PHASES:
        assert value(after_fetch, f"kafka_network_requestmetrics_{phase}_count", request="Produce") == produces
        assert value(after_fetch, f"kafka_network_requestmetrics_{phase}_count", request="Fetch") == fetches
    for request in ("Produce", "Fetch", "Metadata"):  # the phases add up to TotalTimeMs
        parts = sum(value(after_fetch, f"kafka_network_requestmetrics_{phase}_sum", request=request)
                    for phase in PHASES if phase != "totaltimems")
        assert parts == pytest.approx(
            value(after_fetch, "kafka_network_requestmetrics_totaltimems_sum", request=request), rel=0.01, abs=0.5)
    # a single node has no followers: every Fetch is a consumer's (Kafka's FetchConsumer split)
    assert value(after_fetch, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") == fetches
    assert not series(after_fetch, "kafka_network_requestmetrics_requests_total").keys() & {(("request", "FetchFollower"),)}
    assert 0.0 <= value(after_fetch, "odradek_event_loop_busy_ratio") <= 1.0
    assert value(after_fetch, "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent") == pytest.approx(
        1.0 - value(after_fetch, "odradek_event_loop_busy_ratio"))
    assert value(after_fetch, "kafka_server_leaderreplication_byte_rate") == 0
    # flush.messages=1: every produce request's append was fsynced before its answer
    assert value(after_fetch, "kafka_log_logflushstats_logflushrateandtimems_count") >= produces
    # the committed Grafana dashboard and alert rules query only series a broker serves (the
    # per-partition lag series need a group or a follower: test_group_lag / test_metrics_cluster)
    served = {name for name, _ in after_fetch}
    lag_series = {"kafka_consumergroup_lag", "kafka_server_fetcherlagmetrics_consumerlag"}
    assert queried_names() - served - lag_series == set()
    for op in ("Produce", "Fetch"):
        assert value(after_fetch, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation=op) >= 0


def test_metrics_off_by_default(tmp_path: Path) -> None:
    """metrics.port=0 (the default) serves nothing: no thread, no port."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        assert "serving metrics" not in b.log_text()
    finally:
        b.stop()


def test_json_log_format_writes_one_object_per_line(tmp_path: Path) -> None:
    """log.format=json: every line the broker writes, the config warnings before it starts
    included, is one JSON object with timestamp, level, logger and event."""
    b = BrokerProcess(tmp_path / "data", overrides=["log.format=json", "no.such.key=1"])
    b.ready_marker = '"event": "broker started"'
    b.start()
    create_topic(b, "j", 1)
    b.stop()
    lines = [line for line in b.lines if line.strip()]
    assert len(lines) > 5
    events = [json.loads(line) for line in lines]  # fails on any line that is not one object
    assert all(isinstance(e, dict) and {"timestamp", "level", "event"} <= e.keys() for e in events)
    assert any("no.such.key" in e["event"] and e["level"] == "warning" for e in events)
    assert any(e["event"] == "shut down cleanly" for e in events)


def test_group_lag_is_end_offset_minus_committed(tmp_path: Path) -> None:
    """A group's consumer reads and commits 40 records then stops; 25 and 15 more records land on
    the two partitions: kafka_consumergroup_lag says 25 and 15, current_offset 20 and 20."""
    port = free_port()
    b = BrokerProcess(tmp_path / "data", overrides=[*FAST_GROUPS, f"metrics.port={port}", "metrics.host=127.0.0.1"])
    b.start()
    try:
        create_topic(b, "lagged", 2)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")

        def produce(per_partition: dict[int, int]) -> None:
            for p, count in per_partition.items():
                for i in range(count):
                    producer.send("lagged", f"{p}-{i}".encode(), partition=p)
            producer.flush()

        produce({0: 20, 1: 20})
        consumer = KafkaConsumer("lagged", bootstrap_servers=b.bootstrap, group_id="g", enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000)
        seen = 0
        for _ in consumer:
            seen += 1
            if seen == 40:
                break
        consumer.commit()
        consumer.close()
        produce({0: 25, 1: 15})
        producer.close()
        samples = scrape("127.0.0.1", port)
        labels = {"consumergroup": "g", "topic": "lagged"}
        assert value(samples, "kafka_consumergroup_current_offset", partition="0", **labels) == 20
        assert value(samples, "kafka_consumergroup_current_offset", partition="1", **labels) == 20
        assert value(samples, "kafka_consumergroup_lag", partition="0", **labels) == 25
        assert value(samples, "kafka_consumergroup_lag", partition="1", **labels) == 15
        assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
        assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
        assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2
    finally:
        b.stop()


def test_deleted_topic_series_go_away(mbroker: BrokerProcess) -> None:
    """After DeleteTopics the topic's series are no longer served; the all-topics totals keep
    what was counted (they are totals since the broker started)."""
    port = mbroker.metrics_port
    create_topic(mbroker, "gone", 1)
    producer = KafkaProducer(bootstrap_servers=mbroker.bootstrap, acks="all")
    for i in range(10):
        producer.send("gone", b"x%d" % i)
    producer.flush()
    producer.close()
    assert value(scrape("127.0.0.1", port), "kafka_server_brokertopicmetrics_messagesin_total", topic="gone") == 10
    admin = KafkaAdminClient(bootstrap_servers=mbroker.bootstrap)
    admin.delete_topics(["gone"])
    admin.close()
    deadline = time.monotonic() + 30
    while True:
        samples = scrape("127.0.0.1", port)
        left = [(n, labels) for n, labels in samples if ("topic", "gone") in labels]
        if not left:
            break
        assert time.monotonic() < deadline, left
        time.sleep(0.1)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total") == 10
