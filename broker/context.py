"""What a handler gets besides its request: the server, the connection and the header."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.apis.registry import advertised
from broker.quota.controller_mutation import ControllerMutationQuota
from broker.quota.entity import sanitize, user_name
from broker.quota.manager import ClientQuotaManager
from broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_bit_field,
)
from protocol.messages import RequestHeader
from protocol.messages.api_versions_response import ApiVersion
from storage.errors import StorageError

if TYPE_CHECKING:
    from broker.server import BrokerServer


ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class RequestContext:
    server: BrokerServer
    connection: Any  # KafkaConnection; Any to avoid an import cycle
    header: RequestHeader
    size: int = 0  # the request's bytes (without the size prefix): what a produce quota counts
    # time.monotonic() of the request's arrival, dispatch and first wait, for RequestMetrics
    # (broker/metrics/request_metrics.py; 0.0 when metrics are off or the handler never waited)
    received: float = 0.0
    started: float = 0.0
    suspended: float = 0.0
    # the longest throttle this request earned (quotas): the connection is muted from now, and
    # the throttle time runs from when the response is sent (KIP-219, KafkaConnection._answer)
    throttle_ms: int = 0

    @property
    def quota_entity(self) -> tuple[str, str]:
        """The (user, client-id) the client quotas know this client by, sanitized as ZooKeeper's
        entity names (broker.quota.entity)."""
        return sanitize(user_name(self.principal)), sanitize(self.client_id or "")

    def controller_mutation_quota(self, strict_since: int) -> ControllerMutationQuota | None:
        """This request's controller_mutation_rate quota (None: the client has none), strict
        from version `strict_since` on (broker.quota.controller_mutation)."""
        return self.server.quotas.controller_mutation.new_quota_for(*self.quota_entity, self.version >= strict_since)

    def mutation_throttle_ms(self, quota: ControllerMutationQuota | None) -> int:
        """The throttle time a request's controller mutations earned; the connection is muted for
        it (sendResponseMaybeThrottleWithControllerQuota)."""
        throttle_ms = quota.throttle_time_ms if quota is not None else 0
        self._throttle(throttle_ms)
        return throttle_ms

    def _throttle(self, throttle_ms: int) -> None:
        if throttle_ms <= 0:
            return
        if self.throttle_ms == 0:
            self.connection.throttle()
        self.throttle_ms = max(self.throttle_ms, throttle_ms)

    def record_quota(self, manager: ClientQuotaManager, value: float) -> int:
        """Record `value` (bytes, ...) against this client's quota of `manager`'s type; when over
        it, mute the connection for the throttle time (KIP-219: from when the response is sent),
        which is returned for the response's throttle_time_ms. Free when no quota is set at all."""
        if not manager.quotas:
            return 0
        throttle_ms = manager.record_and_get_throttle_time_ms(*self.quota_entity, value)
        self._throttle(throttle_ms)
        return throttle_ms

    @property
    def version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    # -- authorization (Kafka's AuthHelper) ----------------------------------------------------

    @property
    def principal(self) -> str:
        """Who sent the request, as Kafka's KafkaPrincipal string, and the one place it is read:
        `User:ANONYMOUS` on PLAINTEXT and on TLS without a client certificate,
        `User:<mapped certificate subject>` with one (ssl.principal.mapping.rules), set on the
        connection when its handshake completes and fixed for its life."""
        return getattr(self.connection, "principal", None) or ANONYMOUS

    @property
    def client_host(self) -> str:
        """The client's IP address, which ACL hosts are compared with."""
        peer = getattr(self.connection, "peer", "") or ""
        return peer.rsplit(":", 1)[0].strip("[]") if ":" in peer else peer

    def authorize(self, op: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """AuthHelper.authorize: allowed when no authorizer is configured."""
        auth = self.server.authorizer
        return auth is None or auth.authorize(self.principal, self.client_host, op, resource_type, name)

    def authorized_names(self, op: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """AuthHelper.filterByAuthorized: the names (each decided once) the caller may `op`."""
        unique = set(names)
        auth = self.server.authorizer
        if auth is None:
            return unique
        return {n for n in unique if auth.authorize(self.principal, self.client_host, op, resource_type, n)}

    def authorize_cluster(self, op: AclOperation) -> bool:
        return self.authorize(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_by_resource_type(self, op: AclOperation, resource_type: ResourceType) -> bool:
        auth = self.server.authorizer
        return auth is None or auth.authorize_by_resource_type(self.principal, self.client_host, op, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's field: every supported operation without an authorizer (AuthHelper)."""
        auth = self.server.authorizer
        if auth is None:
            return to_bit_field(SUPPORTED_OPERATIONS[resource_type])
        return auth.authorized_operations(self.principal, self.client_host, resource_type, name)

    async def committed(self, results: Iterable[Any] = ()) -> StorageError | None:
        """Await the controller's ``committed()`` before answering a change. When the metadata
        could not be written (a full disk), every result in ``results`` without an error yet --
        what this request changed -- gets KAFKA_STORAGE_ERROR and the message, and the error is
        returned: the request is answered, its connection stays open. None once durable."""
        controller = self.server.controller
        if controller is None:  # ZooKeeper mode: nothing was changed through a local store
            return None
        try:
            await controller.committed()
        except StorageError as e:
            for r in results:
                if r.error_code == 0:
                    r.error_code = e.code
                    if hasattr(r, "error_message"):
                        r.error_message = e.message
            return e
        return None

    def api_version_keys(self) -> list[ApiVersion]:
        """What ApiVersions advertises: a ZooKeeper-mode broker also lists the controller's
        requests to brokers (LeaderAndIsr, StopReplica, UpdateMetadata), as Kafka's do."""
        return [ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in advertised(zk_mode=self.server.zk_mode)]
