"""The broker's client quotas: the quota configs every entity has (as the config handler or the
single node's metadata store last gave them) and a ClientQuotaManager per quota type (Kafka's
QuotaFactory.QuotaManagers).

Quota configs are read at every record, so a change applies to the next request without restart.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from broker.quota.controller_mutation import ControllerMutationQuotaManager
from broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    parse_entity,
    parse_quota_config,
)
from broker.quota.manager import ClientQuotaManager

log = structlog.get_logger("odradek.quota")


class ClientQuotas:
    def __init__(self, samples: int = 11, window_s: int = 1, controller_samples: int = 11,
                 controller_window_s: int = 1) -> None:
        self.configs: dict[Entity, dict[str, float]] = {}
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.configs, samples=samples, window_s=window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.configs, samples=samples, window_s=window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.configs, samples=samples, window_s=window_s,
                                          max_throttle_ms=window_s * 1000)
        self.controller_mutation = ControllerMutationQuotaManager(
            self.configs, samples=controller_samples, window_s=controller_window_s)

    def update(self, entity: Entity, config: Mapping[str, str]) -> None:
        """An entity's stored configs (all of them; none removes its quotas)."""
        quota = parse_quota_config(config)
        if quota == self.configs.get(entity, {}):
            return
        if quota:
            self.configs[entity] = quota
        else:
            self.configs.pop(entity, None)
        log.info("Client quota changed", user=entity[0], client_id=entity[1], quotas=quota or None)

    def process_config_changes(self, entity_type: str, entity: str, config: Mapping[str, str]) -> None:
        """A ZooKeeper config change of `users/<entity>` or `clients/<entity>`."""
        self.update(parse_entity(entity_type, entity), config)
