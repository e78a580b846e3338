"""request_percentage on a single node over real TCP (issue #23 §4): a client-id with a tiny
request quota sending Metadata requests one after another gets a response with throttle_time_ms
> 0 (at most one window, Kafka's bounded request throttle) within a bounded number of requests,
and another client-id is not throttled."""

from __future__ import annotations

from protocol.messages import MetadataRequest
from tests.broker_process import BrokerProcess, module_broker
from tests.raw_client import RawConnection, set_client_quota

broker = module_broker("request-quota")


def first_throttle(conn: RawConnection, limit: int) -> int:
    """The throttle time of the first throttled Metadata answer (0: none in `limit` requests)."""
    for _ in range(limit):
        resp = conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        if resp.throttle_time_ms > 0:
            return resp.throttle_time_ms
    return 0


def test_request_percentage_throttles(broker: BrokerProcess) -> None:
    set_client_quota(broker.port, "rq", "request_percentage", 0.001)
    throttle_ms = first_throttle(RawConnection(broker.port, client_id="rq"), 2000)
    assert 0 < throttle_ms <= 1000, throttle_ms
    assert first_throttle(RawConnection(broker.port, client_id="other"), 200) == 0
