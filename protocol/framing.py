"""Request/response framing: size prefix, header versions, header + body codecs.

Why a module of its own: which header version goes with a message is a property of the API and
its version (flexible versions use request header v2 / response header v1), with two exceptions
Kafka carries for compatibility: ControlledShutdown v0 has header v0 (no client id), and the
ApiVersions response always uses response header v0 so that a client can read the answer even
when the broker did not understand the version it asked for. Everything here is sans-I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from protocol import fetch_lean
from protocol.messages import REQUESTS, RESPONSES, RequestHeader, ResponseHeader
from protocol.primitives import (
    DECODE_ERRORS,
    ApiMessage,
    DecodeError,
    UnsupportedVersionError,
)

__all__ = [
    "API_VERSIONS_KEY",
    "CONTROLLED_SHUTDOWN_KEY",
    "UnknownApiKeyError",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_request_frame",
    "encode_response",
    "encode_response_frame",
    "parse_request",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")


class UnknownApiKeyError(DecodeError):
    """The request names an API key no spec defines."""


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    cls = REQUESTS.get(api_key)
    return 2 if cls is not None and cls.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    cls = RESPONSES.get(api_key)
    return 1 if cls is not None and cls.is_flexible(api_version) else 0


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Decode the header of a request frame (size prefix already removed).

    Returns the header and the offset of the body. For an API key or version we do not know the
    header is decoded as v1 (api key, version, correlation id, client id), which is what every
    Kafka client sends for a version it is probing, so the broker can still answer with the
    right correlation id."""
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        api_key, api_version, _ = _PEEK.unpack_from(mv, 0)
        if api_key == fetch_lean.FETCH_KEY and api_version == fetch_lean.LEAN_VERSION:
            lean = fetch_lean.decode_request_header(mv)
            if lean is not None:
                return lean
        cls = REQUESTS.get(api_key)
        if cls is not None and cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
            return RequestHeader.decode_from(mv, 0, request_header_version(api_key, api_version))
        return RequestHeader.decode_from(mv, 0, 1)
    except DecodeError:
        raise
    except DECODE_ERRORS as e:
        raise DecodeError(f"malformed request header: {e}") from e


def decode_request_body(header: RequestHeader, frame: bytes | memoryview, pos: int) -> ApiMessage:
    """Decode the body that follows `header`. Raises UnknownApiKeyError, UnsupportedVersionError
    (the broker answers UNSUPPORTED_VERSION) or DecodeError (the broker closes the connection)."""
    cls = REQUESTS.get(header.request_api_key)
    if cls is None:
        raise UnknownApiKeyError(f"unknown api key {header.request_api_key}")
    if header.request_api_key == fetch_lean.FETCH_KEY and header.request_api_version == fetch_lean.LEAN_VERSION:
        lean = fetch_lean.decode_request(frame if isinstance(frame, memoryview) else memoryview(frame), pos)
        if lean is not None:
            return lean
    return cls.decode(frame, header.request_api_version, pos)


def parse_request(frame: bytes | memoryview) -> tuple[RequestHeader, ApiMessage]:
    header, pos = decode_request_header(frame)
    return header, decode_request_body(header, frame, pos)


def encode_request(header: RequestHeader, body: ApiMessage) -> bytes:
    """Header + body, without the size prefix."""
    parts: list[bytes] = []
    w = parts.append
    header.encode_into(
        request_header_version(header.request_api_key, header.request_api_version), w
    )
    body.encode_into(header.request_api_version, w)
    return b"".join(parts)


def encode_request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: ApiMessage
) -> bytes:
    if api_key == fetch_lean.FETCH_KEY and api_version == fetch_lean.LEAN_VERSION:
        lean = fetch_lean.encode_request_frame(correlation_id, client_id, body)
        if lean is not None:
            return lean
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    data = encode_request(header, body)
    return _SIZE.pack(len(data)) + data


def encode_response(
    correlation_id: int, api_key: int, api_version: int, body: ApiMessage, w: Callable[[Any], Any]
) -> None:
    """Append response header + body chunks via `w` (no size prefix); record batches stay the
    buffers they were (memoryviews of segment files) until the transport writes them."""
    header = ResponseHeader(correlation_id=correlation_id)
    header.encode_into(response_header_version(api_key, api_version), w)
    body.encode_into(api_version, w)


def encode_response_frame(
    correlation_id: int, api_key: int, api_version: int, body: ApiMessage
) -> list[Any]:
    """Chunks of a complete size-prefixed response frame, ready for `transport.writelines`: the
    size prefix alone first."""
    if api_key == fetch_lean.FETCH_KEY and api_version == fetch_lean.LEAN_VERSION:
        lean = fetch_lean.encode_response_frame(correlation_id, body)
        if lean is not None:
            return lean
    chunks: list[Any] = [b""]
    encode_response(correlation_id, api_key, api_version, body, chunks.append)
    chunks[0] = _SIZE.pack(sum(map(len, chunks)))
    return chunks


def decode_response(
    frame: bytes | memoryview, api_key: int, api_version: int
) -> tuple[int, ApiMessage]:
    """(correlation id, body) of a response frame without its size prefix (client side)."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnknownApiKeyError(f"unknown api key {api_key}")
    if api_key == fetch_lean.FETCH_KEY and api_version == fetch_lean.LEAN_VERSION:
        mv = frame if isinstance(frame, memoryview) else memoryview(frame)
        if len(mv) > 4 and mv[4] == 0:  # response header v1 without tagged fields
            lean = fetch_lean.decode_response(mv, 5)
            if lean is not None:
                return _SIZE.unpack_from(mv, 0)[0], lean
    header, pos = ResponseHeader.decode_from(
        frame, 0, response_header_version(api_key, api_version)
    )
    return header.correlation_id, cls.decode(frame, api_version, pos)


__all__ += ["UnsupportedVersionError"]
