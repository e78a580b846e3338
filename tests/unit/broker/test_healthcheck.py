"""The Docker HEALTHCHECK's hand-encoded Metadata v1 against the generated codecs."""

from __future__ import annotations

import struct

from broker.healthcheck import MetadataAnswer, decode_response, default_address, encode_request
from protocol.framing import decode_request_body, decode_request_header, encode_response_frame
from protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)


def test_request_is_a_metadata_v1_for_no_topics():
    frame = encode_request(7)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, pos = decode_request_header(frame[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (3, 1, 7)
    assert header.client_id == "odradek-healthcheck"
    body = decode_request_body(header, frame[4:], pos)
    assert body.topics == []  # empty, not null (null asks for every topic)


def test_decodes_brokers_and_controller_of_a_real_response():
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=1, host="broker-1", port=9092, rack="r1"),
                 MetadataResponseBroker(node_id=3, host="broker-3", port=9092, rack=None)],
        controller_id=3,
        topics=[MetadataResponseTopic(name="t", partitions=[MetadataResponsePartition(
            partition_index=0, leader_id=1, replica_nodes=[1, 3], isr_nodes=[1, 3])])],
    )
    frame = b"".join(bytes(c) for c in encode_response_frame(7, 3, 1, response))[4:]
    answer = decode_response(frame, 7)
    assert (answer.broker_ids, answer.controller_id) == ([1, 3], 3)
    assert answer.healthy(3)[0] and answer.healthy(None)[0]
    assert answer.healthy(2) == (False, "broker 2 is not among the live brokers [1, 3]")


def test_unhealthy_without_a_controller():
    assert MetadataAnswer([1], -1).healthy(1) == (False, "no controller known yet")


def test_default_address_is_the_first_listener_with_wildcards_as_loopback():
    assert default_address({}) == ("127.0.0.1", 9092)
    env = {"KAFKA_LISTENERS": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092"}
    assert default_address(env) == ("127.0.0.1", 9092)
    assert default_address({"KAFKA_LISTENERS": "PLAINTEXT://[::]:9093"}) == ("127.0.0.1", 9093)
    assert default_address({"KAFKA_LISTENERS": "PLAINTEXT://10.0.0.5:9094"}) == ("10.0.0.5", 9094)
