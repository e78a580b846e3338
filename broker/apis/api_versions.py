"""ApiVersions (key 18), versions 0-4.

The answer lists exactly the (key, min, max) ranges registered by handler modules. A request at
a version we do not know is answered by the network layer with UNSUPPORTED_VERSION in the v0
layout (response header v0 always, so clients can read it and retry at a version we support).
v3+ carries client software name/version (KIP-511), validated as Kafka does: INVALID_REQUEST when
either is empty or has characters outside [a-zA-Z0-9._-]."""

from __future__ import annotations

import re

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@api(18, 0, 4)
async def handle(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.version >= 3 and not (
        _SOFTWARE.fullmatch(req.client_software_name or "")
        and _SOFTWARE.fullmatch(req.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return ApiVersionsResponse(error_code=0, api_keys=ctx.api_version_keys(), throttle_time_ms=0)
