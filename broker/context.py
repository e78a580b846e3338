"""What a handler gets besides its request: the server, the connection and the header."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.apis.registry import advertised
from protocol.messages import RequestHeader
from protocol.messages.api_versions_response import ApiVersion

if TYPE_CHECKING:
    from broker.server import BrokerServer


@dataclass(slots=True)
class RequestContext:
    server: BrokerServer
    connection: Any  # KafkaConnection; Any to avoid an import cycle
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @staticmethod
    def api_version_keys() -> list[ApiVersion]:
        return [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised()]
