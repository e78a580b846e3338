"""The controller's requests to a broker need CLUSTER_ACTION on the cluster, as in Kafka 3.9: a
ZooKeeper-mode Odradek broker with an authorizer and no super users refuses UpdateMetadata,
LeaderAndIsr and StopReplica from User:ANONYMOUS (the PLAINTEXT principal, which is also what
its peers are) with CLUSTER_AUTHORIZATION_FAILED, for the request and each partition, and
does not apply them (the partition it was told to lead is not created)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.cluster.control_requests import Controller, Part
from tests.security.acl_tools import AUTHORIZER
from tests.zookeeper import ZooKeeperServer

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def test_controller_requests_need_cluster_action(zookeeper: ZooKeeperServer,
                                                       start_broker: Callable[..., BrokerProcess]) -> None:
    b = await asyncio.to_thread(start_broker, 1, zookeeper.connect_string("/acl"), AUTHORIZER,
                                "allow.everyone.if.no.acl.found=false")
    controller = Controller()
    controller.add_broker(1, b.port)
    part = Part("ca", 0, leader=1, leader_epoch=5, isr=[1], replicas=[1])
    ids = {"ca": uuid.uuid4()}
    try:
        um: Any = await controller.update_metadata(1, controller_epoch=99, broker_epoch=-1,
                                                   live=[(1, b.port, None)], parts=[part], topic_ids=ids)
        assert um.error_code == DENIED
        lai: Any = await controller.leader_and_isr(1, controller_epoch=99, broker_epoch=-1, parts=[part],
                                                   topic_ids=ids, leaders=[(1, b.port)])
        assert lai.error_code == DENIED
        assert [p.error_code for t in lai.topics for p in t.partition_errors] == [DENIED]
        sr: Any = await controller.stop_replica(1, controller_epoch=99, broker_epoch=-1, parts=[("ca", 0, 5, True)])
        assert (sr.error_code, [p.error_code for p in sr.partition_errors]) == (DENIED, [DENIED])
        assert not (b.log_dir / "ca-0").exists()  # the LeaderAndIsr was not applied
    finally:
        await controller.close()
