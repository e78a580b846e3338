"""SaslHandshake (key 17), versions 0-1.

On a SASL listener the handshake is answered by the connection's authenticator (broker.sasl)
before authentication completes. What reaches this handler is a handshake on a listener without
SASL or after authentication: ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it."""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse


@api(17, 0, 1)
async def handle(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
