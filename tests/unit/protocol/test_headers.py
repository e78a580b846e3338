"""Request/response header versions and their bytes on the wire.

Kafka's rule (generator `ApiMessageTypeGenerator.generateHeaderVersion`, giving
`ApiKeys.requestHeaderVersion` / `responseHeaderVersion`): a request uses header v2 in the
request's flexible versions and v1 otherwise, except ControlledShutdown v0, which has header v0
(no client id); a response uses header v1 in flexible versions and v0 otherwise, except
ApiVersions, whose response header is always v0 (KIP-511), so that a client can read the answer
to a version the broker does not understand. The expected tables below are computed from the
spec JSONs directly, not from the generated classes under test."""

from __future__ import annotations

import functools
import json
import re
import struct
from pathlib import Path

import pytest

from protocol.framing import (
    API_VERSIONS_KEY,
    CONTROLLED_SHUTDOWN_KEY,
    decode_request_header,
    decode_response,
    encode_request_frame,
    encode_response_frame,
    parse_request,
    request_header_version,
    response_header_version,
)
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    MetadataResponse,
    RequestHeader,
    ResponseHeader,
)
from protocol.messages.api_versions_response import ApiVersion
from tests.kafka_specs import require_specs

METADATA_KEY = 3


def load_spec(path: Path) -> dict:
    return json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))


@functools.cache
def spec_versions(kind: str) -> list[tuple[int, int, int | None, str]]:
    """(api key, version, first flexible version or None, name) for every version of every
    spec of `kind` ("request" / "response"); skips (or fails in CI) without the specs."""
    specs = require_specs()
    out = []
    for path in sorted(specs.glob(f"*{kind.capitalize()}.json")):
        spec = load_spec(path)
        if spec["type"] != kind:
            continue
        lo, _, hi = spec["validVersions"].partition("-")
        hi = hi or lo
        flex = spec.get("flexibleVersions", "none")
        if flex == "none":
            first_flex = None
        else:
            assert flex.endswith("+"), f"{path.name}: flexibleVersions {flex!r}"
            first_flex = int(flex[:-1])
        for v in range(int(lo), int(hi) + 1):
            out.append((spec["apiKey"], v, first_flex, spec["name"]))
    return out


# ---------------------------------------------------------------------------------------------
# header version selection


def test_the_spec_tables_are_complete() -> None:
    requests, responses = spec_versions("request"), spec_versions("response")
    assert len({k for k, *_ in requests}) > 60
    assert {k for k, *_ in requests} == {k for k, *_ in responses}


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (0, 8, 1), (0, 9, 2),  # Produce, flexible 9+
        (1, 11, 1), (1, 12, 2),  # Fetch, flexible 12+
        (3, 8, 1), (3, 9, 2), (3, 12, 2),  # Metadata, flexible 9+
        (CONTROLLED_SHUTDOWN_KEY, 0, 0),  # the one header v0
        (CONTROLLED_SHUTDOWN_KEY, 1, 1), (CONTROLLED_SHUTDOWN_KEY, 2, 1),
        (CONTROLLED_SHUTDOWN_KEY, 3, 2),  # flexible 3+
        (API_VERSIONS_KEY, 0, 1), (API_VERSIONS_KEY, 2, 1),
        (API_VERSIONS_KEY, 3, 2), (API_VERSIONS_KEY, 4, 2),  # the request side is not special
    ],
)  # fmt: skip
def test_request_header_version_known_points(api_key: int, version: int, expected: int) -> None:
    """Spot values as in Kafka's generated ApiMessageType.requestHeaderVersion."""
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (0, 8, 0), (0, 9, 1),  # Produce
        (1, 11, 0), (1, 12, 1),  # Fetch
        (3, 8, 0), (3, 9, 1), (3, 12, 1),  # Metadata
        (CONTROLLED_SHUTDOWN_KEY, 0, 0), (CONTROLLED_SHUTDOWN_KEY, 3, 1),
        (API_VERSIONS_KEY, 0, 0), (API_VERSIONS_KEY, 2, 0),
        (API_VERSIONS_KEY, 3, 0), (API_VERSIONS_KEY, 4, 0),  # KIP-511: always v0
    ],
)  # fmt: skip
def test_response_header_version_known_points(api_key: int, version: int, expected: int) -> None:
    assert response_header_version(api_key, version) == expected


def test_request_header_version_follows_every_spec() -> None:
    wrong = []
    for api_key, v, first_flex, name in spec_versions("request"):
        if api_key == CONTROLLED_SHUTDOWN_KEY and v == 0:
            expected = 0
        elif first_flex is not None and v >= first_flex:
            expected = 2
        else:
            expected = 1
        got = request_header_version(api_key, v)
        if got != expected:
            wrong.append(f"{name} v{v}: {got} != {expected}")
    assert not wrong, wrong


def test_response_header_version_follows_every_spec() -> None:
    wrong = []
    for api_key, v, first_flex, name in spec_versions("response"):
        if api_key == API_VERSIONS_KEY:
            expected = 0
        elif first_flex is not None and v >= first_flex:
            expected = 1
        else:
            expected = 0
        got = response_header_version(api_key, v)
        if got != expected:
            wrong.append(f"{name} v{v}: {got} != {expected}")
    assert not wrong, wrong


def test_api_versions_response_is_flexible_yet_keeps_header_v0() -> None:
    """The exception is real: the body of ApiVersions v3+ is flexible, only its header is not."""
    assert ApiVersionsResponse.is_flexible(3)
    assert not ApiVersionsResponse.is_flexible(2)
    for v in range(ApiVersionsResponse.MIN_VERSION, ApiVersionsResponse.MAX_VERSION + 1):
        assert response_header_version(API_VERSIONS_KEY, v) == 0


def test_header_versions_of_unknown_api_keys() -> None:
    """An API key no spec defines: header v1 requests (what a probing client sends), v0
    responses; neither selection raises."""
    assert request_header_version(32000, 0) == 1
    assert response_header_version(32000, 0) == 0


def test_header_specs_match_the_versions_selected() -> None:
    assert (RequestHeader.MIN_VERSION, RequestHeader.MAX_VERSION) == (0, 2)
    assert RequestHeader.FLEXIBLE_VERSION == 2
    assert (ResponseHeader.MIN_VERSION, ResponseHeader.MAX_VERSION) == (0, 1)
    assert ResponseHeader.FLEXIBLE_VERSION == 1


# ---------------------------------------------------------------------------------------------
# response header bytes


def test_api_versions_v3_response_frame_bytes() -> None:
    """Header v0: the error code follows the correlation id directly, no tagged-field byte."""
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)],
        throttle_time_ms=0,
    )
    frame = b"".join(encode_response_frame(0x0ABCDEF1, API_VERSIONS_KEY, 3, body))
    expected = bytes.fromhex(
        "00000013"  # size: 19
        "0abcdef1"  # correlation id; header v0 ends here
        "0000"  # error_code
        "02"  # api_keys: compact array of 1
        "0012" "0000" "0004" "00"  # ApiVersions 0-4, no tagged fields
        "00000000"  # throttle_time_ms
        "00"  # body tagged fields
    )  # fmt: skip
    assert frame == expected
    assert decode_response(frame[4:], API_VERSIONS_KEY, 3) == (0x0ABCDEF1, body)


def test_api_versions_v3_error_response_keeps_header_v0() -> None:
    """What a broker sends to a client asking for a version it does not know: still header v0,
    and (as Kafka does) a body the client can parse."""
    body = ApiVersionsResponse(error_code=35, api_keys=[])
    frame = b"".join(encode_response_frame(7, API_VERSIONS_KEY, 3, body))
    assert frame[4:8] == b"\x00\x00\x00\x07"
    assert frame[8:10] == b"\x00\x23"  # error_code right after the correlation id


def test_metadata_v12_response_frame_has_a_tagged_field_byte() -> None:
    body = MetadataResponse(throttle_time_ms=7, brokers=[], cluster_id=None, controller_id=3)
    frame = b"".join(encode_response_frame(0x01020304, METADATA_KEY, 12, body))
    expected = bytes.fromhex(
        "00000011"  # size: 17
        "01020304"  # correlation id
        "00"  # header v1: empty tagged fields
        "00000007"  # throttle_time_ms
        "01"  # brokers: empty compact array
        "00"  # cluster_id: null compact string
        "00000003"  # controller_id
        "01"  # topics: empty compact array
        "00"  # body tagged fields
    )  # fmt: skip
    assert frame == expected
    assert decode_response(frame[4:], METADATA_KEY, 12) == (0x01020304, body)


def test_metadata_v8_response_frame_has_no_tagged_field_byte() -> None:
    body = MetadataResponse(throttle_time_ms=7)
    frame = b"".join(encode_response_frame(9, METADATA_KEY, 8, body))
    assert frame[4:12] == bytes.fromhex("00000009" "00000007")  # fmt: skip
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


def test_decode_response_reads_a_header_v1_tagged_field() -> None:
    """A flexible response header may carry tagged fields; the client skips them."""
    body = MetadataResponse(throttle_time_ms=7, brokers=[], controller_id=3)
    frame = b"".join(encode_response_frame(5, METADATA_KEY, 12, body))[4:]
    tagged = frame[:4] + bytes.fromhex("01" "09" "02" "abcd") + frame[5:]  # fmt: skip
    assert decode_response(tagged, METADATA_KEY, 12) == (5, body)


# ---------------------------------------------------------------------------------------------
# request header decoding


def test_decode_request_header_v0_has_no_client_id() -> None:
    """ControlledShutdown v0: api key, version, correlation id, then the body (broker id)."""
    frame = bytes.fromhex(
        "0007" "0000" "0000002a"  # header v0
        "00000005"  # broker_id
    )  # fmt: skip
    header, pos = decode_request_header(frame)
    assert pos == 8
    assert (header.request_api_key, header.request_api_version) == (7, 0)
    assert header.correlation_id == 42
    assert header.client_id == ""  # absent from v0, the default
    h2, body = parse_request(frame)
    assert h2 == header
    assert body == ControlledShutdownRequest(broker_id=5)


def test_encode_request_frame_controlled_shutdown_v0_drops_client_id() -> None:
    frame = encode_request_frame(7, 0, 42, "ignored", ControlledShutdownRequest(broker_id=5))
    assert frame == bytes.fromhex("0000000c" "0007" "0000" "0000002a" "00000005")  # fmt: skip


def test_decode_request_header_v1() -> None:
    frame = bytes.fromhex(
        "0012" "0002" "00000001"  # ApiVersions v2
        "0003" "616263"  # client_id "abc"
    )  # fmt: skip
    header, pos = decode_request_header(frame)
    assert pos == len(frame)
    assert header.client_id == "abc"
    assert header._unknown_tagged_fields is None


def test_decode_request_header_v1_null_client_id() -> None:
    frame = bytes.fromhex("0003" "0008" "00000001" "ffff")  # fmt: skip
    header, pos = decode_request_header(frame)
    assert pos == len(frame)
    assert header.client_id is None


API_VERSIONS_V3_REQUEST = bytes.fromhex(
    "0012" "0003" "00000063"  # ApiVersions v3, correlation id 99
    "0006" "636c69656e74"  # client_id "client": int16 length even in header v2
    "02"  # header tagged fields: 2
    "03" "01" "ff"  # unknown tag 3, 1 byte
    "2a" "02" "6869"  # unknown tag 42, 2 bytes
    "0b" "6f6472616465" "6b2d7079"  # client_software_name "odradek-py" (compact)
    "06" "302e312e30"  # client_software_version "0.1.0" (compact)
    "00"  # body tagged fields
)  # fmt: skip


def test_decode_request_header_v2_with_unknown_tags() -> None:
    header, pos = decode_request_header(API_VERSIONS_V3_REQUEST)
    assert (header.request_api_key, header.request_api_version) == (18, 3)
    assert header.correlation_id == 99
    assert header.client_id == "client"
    assert header._unknown_tagged_fields == [(3, b"\xff"), (42, b"hi")]
    assert pos == 8 + 2 + 6 + 1 + 3 + 4
    h2, body = parse_request(API_VERSIONS_V3_REQUEST)
    assert h2 == header
    assert body == ApiVersionsRequest(
        client_software_name="odradek-py", client_software_version="0.1.0"
    )


def test_request_header_v2_reencodes_unknown_tags() -> None:
    header, pos = decode_request_header(API_VERSIONS_V3_REQUEST)
    assert header.encode(2) == API_VERSIONS_V3_REQUEST[:pos]


def test_decode_request_header_v2_without_tags_and_null_client_id() -> None:
    frame = bytes.fromhex("0003" "000c" "00000001" "ffff" "00")  # fmt: skip
    header, pos = decode_request_header(frame)
    assert pos == len(frame)
    assert header.client_id is None
    assert header._unknown_tagged_fields is None


def test_encode_request_frame_flexible_uses_header_v2() -> None:
    body = ApiVersionsRequest(client_software_name="odradek-py", client_software_version="0.1.0")
    frame = encode_request_frame(18, 3, 99, "client", body)
    no_tags = bytes.fromhex(
        "0012" "0003" "00000063" "0006" "636c69656e74" "00"
        "0b" "6f6472616465" "6b2d7079" "06" "302e312e30" "00"
    )  # fmt: skip
    assert frame == struct.pack(">i", len(no_tags)) + no_tags


def test_request_for_an_unknown_version_is_read_with_header_v1() -> None:
    """A client probing ApiVersions v99 sends a header the broker cannot know the version of;
    it is read as v1 so that the correlation id (and client id) still come through."""
    frame = bytes.fromhex("0012" "0063" "00000004" "0001" "78" "00")  # fmt: skip
    header, pos = decode_request_header(frame)
    assert (header.request_api_version, header.correlation_id, header.client_id) == (99, 4, "x")
    assert pos == 11
