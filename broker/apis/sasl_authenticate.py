"""SaslAuthenticate (key 36), versions 0-2 (v1+: session_lifetime_ms; v2: flexible).

On a SASL listener the tokens are evaluated by the connection's authenticator (broker.sasl)
until authentication completes, and again during a KIP-368 re-authentication (begun by a
SaslHandshake on an authenticated connection). What reaches this handler came on a listener
without SASL or after authentication: ILLEGAL_SASL_STATE with Kafka's message."""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse


@api(36, 0, 2)
async def handle(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication")
