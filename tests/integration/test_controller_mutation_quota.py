"""controller_mutation_rate on a single node over real TCP (issue #23 §4, KIP-599 and KIP-219):
with a quota of 1 partition per second (a burst of 11), a strict CreateTopics (v7) creates topics
until the bucket is below zero, then answers THROTTLING_QUOTA_EXCEEDED with a throttle time, and
the connection is not read for that time (the next request on it is answered only after it);
another client-id is not affected."""

from __future__ import annotations

import time

from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, CreateTopicsRequest
from protocol.messages.create_topics_request import CreatableTopic
from tests.broker_process import BrokerProcess, module_broker
from tests.raw_client import RawConnection, set_client_quota

broker = module_broker("mutation-quota")


def create(conn: RawConnection, name: str, partitions: int) -> tuple[int, int]:
    """(error code, throttle_time_ms) of a v7 CreateTopics of one topic."""
    resp = conn.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=30_000))
    return resp.topics[0].error_code, resp.throttle_time_ms


def test_strict_create_topics_refused_over_the_quota_and_the_connection_muted(broker: BrokerProcess) -> None:
    set_client_quota(broker.port, "mut", "controller_mutation_rate", 1.0)
    conn = RawConnection(broker.port, client_id="mut")
    assert create(conn, "m1", 10) == (0, 0)  # 1 token left
    assert create(conn, "m2", 5) == (0, 0)  # allowed while not below zero: -4
    code, throttle_ms = create(conn, "m3", 1)
    assert code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert 3000 <= throttle_ms <= 4000, throttle_ms
    start = time.monotonic()
    conn.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert time.monotonic() - start >= (throttle_ms - 200) / 1000  # muted (KIP-219)
    other = RawConnection(broker.port, client_id="free")
    assert create(other, "m3", 1) == (0, 0)
