"""consumer_byte_rate records the whole Fetch response's size, as Kafka's KafkaApis records
fetchContext.getResponseSize, not only its record bytes: a client-id with a 100 B/s quota
fetching 50 empty partitions (about 1.9 kB of partition headers, no records) is throttled on its
first fetch (answered empty with throttle_time_ms > 0), another client-id is not. Counting only
records, as before, never throttles it. A single node over real TCP."""

from __future__ import annotations

from protocol.messages import FetchRequest
from protocol.messages import fetch_request as fr
from tests.broker_process import BrokerProcess, module_broker
from tests.raw_client import RawConnection, set_client_quota
from tests.txn_raw import create_topic

broker = module_broker("fetch-quota-size")
PARTITIONS = 50


def fetch_all(conn: RawConnection, topic: str) -> tuple[int, int]:
    """(throttle_time_ms, partitions answered) of one sessionless fetch of every partition."""
    resp = conn.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        fr.FetchTopic(topic=topic, partitions=[fr.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 16)
                                               for p in range(PARTITIONS)])]))
    assert resp.error_code == 0, resp
    return resp.throttle_time_ms, sum(len(t.partitions) for t in resp.responses)


def test_fetch_quota_counts_the_whole_response(broker: BrokerProcess) -> None:
    with RawConnection(broker.port, client_id="admin") as admin:
        create_topic(admin, "quota-size", PARTITIONS)
    set_client_quota(broker.port, "fq", "consumer_byte_rate", 100.0)
    with RawConnection(broker.port, client_id="other") as other:
        assert fetch_all(other, "quota-size") == (0, PARTITIONS)
    with RawConnection(broker.port, client_id="fq") as conn:
        throttle_ms, answered = fetch_all(conn, "quota-size")
    # ~1.9 kB over Kafka's 10 s minimum measured span against 100 B/s: ~9 s of throttle, answered empty
    assert 5_000 <= throttle_ms <= 11_000 and answered == 0, (throttle_ms, answered)
