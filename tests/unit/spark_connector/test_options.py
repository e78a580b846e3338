"""Option parsing: names and semantics of Spark's kafka source, errors that say what to fix."""

from __future__ import annotations

import pytest

from spark_connector.errors import OptionError
from spark_connector.options import (
    OffsetSpec,
    Subscription,
    include_headers,
    kafka_client_config,
    parse_read_options,
    parse_write_options,
)

BOOT = {"kafka.bootstrap.servers": "h1:9092, h2:9092"}


def batch(**opts: str):  # type: ignore[no-untyped-def]
    return parse_read_options({**BOOT, **opts}, streaming=False)


def stream(**opts: str):  # type: ignore[no-untyped-def]
    return parse_read_options({**BOOT, **opts}, streaming=True)


def test_defaults_follow_spark() -> None:
    b = batch(subscribe="a, b,a")
    assert b.bootstrap_servers == ("h1:9092", "h2:9092")
    assert b.subscription == Subscription("subscribe", topics=("a", "b"))
    assert b.starting == OffsetSpec("earliest") and b.ending == OffsetSpec("latest")
    assert b.fail_on_data_loss is True and b.include_headers is False
    assert b.max_offsets_per_trigger is None and b.min_partitions is None
    s = stream(subscribePattern="clicks-.*")
    assert s.starting == OffsetSpec("latest") and s.ending is None
    assert s.subscription.matches("clicks-eu") and not s.subscription.matches("x-clicks-eu")


def test_options_are_case_insensitive_and_typed() -> None:
    o = stream(**{"ASSIGN": '{"t": [1, 0]}', "StartingOffsets": '{"t": {"0": 5, "1": -2}}',
                  "maxoffsetspertrigger": "300", "MINPARTITIONS": "4",
                  "failOnDataLoss": "FALSE", "includeHeaders": "true",
                  "kafka.isolation.level": "read_committed",
                  "kafka.max.partition.fetch.bytes": "1048576",
                  "kafka.check.crcs": "false"})
    assert o.subscription.partitions == (("t", 0), ("t", 1))
    assert o.starting == OffsetSpec("specific", offsets={("t", 0): 5, ("t", 1): -2})
    assert (o.max_offsets_per_trigger, o.min_partitions) == (300, 4)
    assert o.fail_on_data_loss is False and o.include_headers is True
    assert o.consumer_config == {"isolation_level": "read_committed",
                                 "max_partition_fetch_bytes": 1048576, "check_crcs": False}


def test_starting_timestamp_wins_over_starting_offsets() -> None:
    o = stream(subscribe="t", startingTimestamp="1700000000000", startingOffsets="earliest")
    assert o.starting == OffsetSpec("timestamp", timestamp_ms=1_700_000_000_000)


@pytest.mark.parametrize(("opts", "message"), [
    ({"subscribe": "t", "startingOffset": "earliest"},
     "unknown option 'startingoffset' for the odradek batch read; known options: assign,"),
    ({"subscribe": "t", "assign": '{"t": [0]}'},
     "Only one of the options 'subscribe', 'subscribePattern', 'assign' must be specified "
     "(got subscribe, assign)"),
    ({}, "One of the options 'subscribe', 'subscribePattern', 'assign' must be specified"),
    ({"subscribe": " , "}, "option 'subscribe': no topics"),
    ({"subscribePattern": "(["}, "option 'subscribePattern': invalid regex"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": 5}'},
     "option 'startingOffsets': malformed JSON"),
    ({"subscribe": "t", "startingOffsets": "first"},
     "option 'startingOffsets' must be 'earliest', 'latest' or per-partition JSON"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "latest is not allowed for batch queries"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'},
     "latest is not allowed for batch queries"),
    ({"subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'},
     "earliest is not allowed for batch queries"),
    ({"assign": '{"t": [0]}', "endingOffsets": '{"t": {"1": 5}}'},
     "option 'endingOffsets' names partitions that are not assigned: t-1"),
    ({"subscribe": "t", "minPartitions": "0"}, "option 'minPartitions' must be at least 1"),
    ({"subscribe": "t", "failOnDataLoss": "yes"},
     "option 'failOnDataLoss' must be true or false"),
    ({"subscribe": "t", "topic": "t"}, "option 'topic' does not apply to a batch read"),
    ({"subscribe": "t", "kafka.group.id": "g"},
     "option 'kafka.group.id' is not supported: the odradek source assigns partitions"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "use the 'startingOffsets'"),
    # Java's security keys are mapped (clients/client_properties.py), and refused when unusable
    ({"subscribe": "t", "kafka.sasl.jaas.config": "x"},
     "option 'kafka.sasl.jaas.config': is set but security.protocol is PLAINTEXT"),
    ({"subscribe": "t", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER"},
     "option 'kafka.sasl.mechanism': OAUTHBEARER cannot be used"),
    ({"subscribe": "t", "kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/no/such/file"},
     "ssl.truststore.location: cannot read it"),
    ({"subscribe": "t", "kafka.isolation.level": "read_dirty"},
     "option 'kafka.isolation.level' must be read_uncommitted or read_committed"),
    # Spark's kafka source takes client settings with the prefix only; the bare name is refused
    # with the prefixed one to use (Spark would ignore it and read uncommitted records)
    ({"subscribe": "t", "isolation.level": "read_committed"},
     "unknown option 'isolation.level' for the odradek batch read (a Kafka client setting takes the "
     "'kafka.' prefix: 'kafka.isolation.level')"),
    ({"subscribe": "t", "kafka.fetch.max.bytes": "lots"},
     "option 'kafka.fetch.max.bytes': 'lots' is not a valid value"),
])
def test_bad_read_options(opts: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as info:
        batch(**opts)
    assert message in str(info.value)


def test_bootstrap_is_required() -> None:
    with pytest.raises(OptionError, match=r"'kafka\.bootstrap\.servers' must be specified"):
        parse_read_options({"subscribe": "t"}, streaming=True)


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(OptionError, match="'endingOffsets' is not valid in streaming queries"):
        stream(subscribe="t", endingOffsets="latest")


def test_write_options() -> None:
    w = parse_write_options({**BOOT, "topic": "out", "kafka.acks": "all",
                             "kafka.compression.type": "zstd", "kafka.linger.ms": "20",
                             "checkpointLocation": "/tmp/cp"}, streaming=True)
    assert w.topic == "out"
    assert w.producer_config == {"acks": "all", "compression_type": "zstd", "linger_ms": 20}
    assert parse_write_options(BOOT, streaming=False).topic is None
    with pytest.raises(OptionError, match="option 'subscribe' does not apply to a streaming write"):
        parse_write_options({**BOOT, "subscribe": "t"}, streaming=True)
    with pytest.raises(OptionError, match="the odradek sink does not write in transactions"):
        parse_write_options({**BOOT, "kafka.transactional.id": "x"}, streaming=False)


def test_kafka_client_config_types() -> None:
    assert kafka_client_config({"acks": "1", "retries": "3", "api.version": "3.0"},
                               "producer") == {"acks": 1, "retries": 3, "api_version": (3, 0)}
    with pytest.raises(OptionError, match="cannot be set from a string"):
        kafka_client_config({"partitioner": "x"}, "producer")


def test_include_headers_decides_the_schema() -> None:
    assert include_headers({"INCLUDEHEADERS": "True"}) is True
    assert include_headers({}) is False
