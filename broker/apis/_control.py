"""What the controller-to-broker requests (LeaderAndIsr, StopReplica, UpdateMetadata) share:
Kafka's broker epoch fence (KafkaApis.isBrokerEpochStale).

A broker that restarted quickly may still receive requests the controller meant for its previous
registration; they carry that registration's epoch (the czxid of /brokers/ids/<id>), older than
ours, and are refused with STALE_BROKER_EPOCH. -1 (a controller before KIP-380) is not checked,
and a newer epoch is accepted: the controller may learn of our new registration before we do."""

from __future__ import annotations

import logging

from broker.context import RequestContext

UNKNOWN_BROKER_EPOCH = -1  # AbstractControlRequest.UNKNOWN_BROKER_EPOCH

log = logging.getLogger("kafka.server.KafkaApis")


def broker_epoch_is_stale(ctx: RequestContext, request_epoch: int, what: str) -> bool:
    """True (and Kafka's info line) when `request_epoch` is older than this broker's."""
    current = ctx.server.broker_epoch
    if request_epoch == UNKNOWN_BROKER_EPOCH or request_epoch >= current:
        return False
    log.info("[KafkaApi-%d] Received %s request with broker epoch %d smaller than the current broker epoch %d",
             ctx.server.config.broker_id, what, request_epoch, current)
    return True


def not_the_controller(ctx: RequestContext) -> bool:
    """ZooKeeper mode: topic changes (CreateTopics, CreatePartitions, DeleteTopics) are made by the
    active controller only; any other broker answers NOT_CONTROLLER for every topic, as Kafka 3.9's
    KafkaApis does (admin clients send them to the controller named in Metadata)."""
    return ctx.server.zk_mode and not getattr(ctx.server.controller, "is_active_controller", True)
