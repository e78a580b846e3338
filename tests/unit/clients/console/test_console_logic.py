"""The console's pure logic: how record bytes show, the Prometheus counters it reads and the
rates it draws, the partition counts of the overview."""

from __future__ import annotations

from clients.console.cluster_view import partition_counts
from clients.console.records import decode
from clients.console.throughput import Sampler, parse


def test_auto_shows_json_text_or_hex_by_what_the_bytes_are():
    assert decode(b'{"a": [1, 2]}') == {"format": "json", "text": '{\n  "a": [\n    1,\n    2\n  ]\n}'}
    assert decode("héllo".encode()) == {"format": "text", "text": "héllo"}
    assert decode(b"\x00\x01\xff") == {"format": "hex", "text": "00 01 ff"}
    assert decode(b"a\x01b") == {"format": "hex", "text": "61 01 62"}  # valid UTF-8, but a control character
    assert decode(b"{not json") == {"format": "text", "text": "{not json"}
    assert decode(None) == {"format": "null", "text": "null"}


def test_an_asked_format_wins():
    assert decode(b'{"a":1}', "text") == {"format": "text", "text": '{"a":1}'}
    assert decode(b'{"a":1}', "hex")["text"] == "7b 22 61 22 3a 31 7d"
    assert decode(b"12", "json") == {"format": "json", "text": "12"}
    assert decode(b"\xff", "text") == {"format": "text", "text": "\ufffd"}
    assert decode(b"\xff", "json") == {"format": "hex", "text": "ff"}


EXPOSITION = """\
# HELP kafka_server_brokertopicmetrics_messagesin_total Incoming messages
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total 150.0
kafka_server_brokertopicmetrics_messagesin_total{topic="clicks"} 100.0
kafka_server_brokertopicmetrics_messagesin_total{topic="views"} 50.0
kafka_server_brokertopicmetrics_bytesin_total{topic="clicks"} 1.5e4
kafka_server_replicamanager_underreplicatedpartitions 0.0
"""


def test_the_counters_are_read_per_topic_and_in_total():
    assert parse(EXPOSITION) == {("messages_in", ""): 150.0, ("messages_in", "clicks"): 100.0,
                                 ("messages_in", "views"): 50.0, ("bytes_in", "clicks"): 15000.0}


def test_rates_are_per_second_between_samples_and_a_reset_counter_is_not_negative():
    s = Sampler(["http://x/metrics"], keep=2)
    s.add(10.0, {("messages_in", ""): 100.0})
    assert s.series("messages_in") == []  # one sample: no rate yet
    s.add(12.0, {("messages_in", ""): 300.0})
    s.add(13.0, {("messages_in", ""): 20.0})  # the broker restarted
    s.add(14.0, {("messages_in", ""): 70.0})
    assert s.series("messages_in") == [0.0, 50.0]  # the oldest dropped: keep=2


def test_offline_and_under_replicated_as_kafka_counts_them():
    def p(leader, replicas, isr):
        return {"leader_id": leader, "replica_nodes": replicas, "isr_nodes": isr}

    described = [{"partitions": [p(1, [1, 2, 3], [1, 2, 3]), p(2, [1, 2, 3], [2, 3]), p(-1, [1], [1])]},
                 {"partitions": [p(3, [3], [3])]}]
    assert partition_counts(described) == {"topics": 2, "partitions": 4, "offline": 1, "under_replicated": 1}
