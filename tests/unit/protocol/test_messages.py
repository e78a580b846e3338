"""Generated message codecs: property round trips of every message (and every coordinator record
schema of `protocol.coordinator`) at every version, malformed input handling, and the generator's
committed output being current."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protocol.coordinator as coordinator
import protocol.messages as messages
from protocol.primitives import ApiMessage, DecodeError, EncodeError, Field, UnsupportedVersionError
from tests.kafka_specs import require_specs

REPO = Path(__file__).resolve().parents[3]

ALL = sorted(
    [getattr(messages, name) for name in messages.__all__ if name not in ("REQUESTS", "RESPONSES")]
    + [getattr(coordinator, name) for name in coordinator.__all__],
    key=lambda c: c.__name__,
)
CASES = [(cls, v) for cls in ALL for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]

INTS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def scalar(t: str) -> st.SearchStrategy:
    if t in INTS:
        return INTS[t]
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return TEXT
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(t)


def struct_strategy(cls: type, version: int, flexible: bool, depth: int = 0) -> st.SearchStrategy:
    """Random instances: fields of this version random, the others left at their defaults."""
    fields: dict[str, st.SearchStrategy] = {}
    for f in cls.FIELDS:
        if f.present(version):
            fields[f.name] = value_strategy(f, version, flexible, depth)
    if flexible:
        fields["_unknown_tagged_fields"] = st.none() | st.lists(
            st.tuples(st.integers(10_000, 10_010), st.binary(max_size=6)),
            max_size=2,
            unique_by=lambda t: t[0],
        ).map(lambda items: sorted(items) or None)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def value_strategy(f: Field, version: int, flexible: bool, depth: int) -> st.SearchStrategy:
    t = f.type
    if t.startswith("[]"):
        elem = t[2:]
        if f.struct is not None:
            inner = struct_strategy(f.struct, version, flexible, depth + 1)
        else:
            inner = scalar(elem)
        s = st.lists(inner, max_size=3 if depth < 2 else 1)
    elif f.struct is not None:
        s = struct_strategy(f.struct, version, flexible, depth + 1)
    else:
        s = scalar(t)
    if f.nullable_in(version):
        s = st.none() | s
    return s


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
def test_round_trip_every_message_every_version(cls: type[ApiMessage], version: int) -> None:
    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(struct_strategy(cls, version, cls.is_flexible(version)))
    def check(msg: ApiMessage) -> None:
        data = msg.encode(version)
        decoded, end = cls.decode_from(data, 0, version)
        assert end == len(data)
        assert decoded == msg
        assert decoded.encode(version) == data
        # every strict prefix is a truncated message: one clear error, never anything else
        for cut in {0, len(data) // 2, len(data) - 1} & set(range(len(data))):
            with pytest.raises(DecodeError):
                cls.decode(data[:cut], version)

    check()


def test_registry_covers_every_api_key_both_ways() -> None:
    assert sorted(messages.REQUESTS) == sorted(messages.RESPONSES)
    assert sorted(messages.REQUESTS) == list(range(88))  # the specs cover api keys 0-87
    for key, cls in messages.REQUESTS.items():
        assert cls.API_KEY == key
        assert messages.RESPONSES[key].API_KEY == key


def test_known_layout_produce_v3() -> None:
    """Produce v3 bytes written out by hand from the spec: transactional id (null), acks,
    timeout, one topic with one partition holding 3 record bytes."""
    from protocol.messages.produce_request import PartitionProduceData, TopicProduceData

    msg = messages.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            TopicProduceData(name="t1", partition_data=[PartitionProduceData(index=2, records=b"xyz")])
        ],
    )
    expected = (
        b"\xff\xff"  # null transactional id
        b"\xff\xff"  # acks -1
        b"\x00\x00\x05\xdc"  # timeout 1500
        b"\x00\x00\x00\x01" + b"\x00\x02t1"  # 1 topic "t1"
        b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02"  # 1 partition, index 2
        b"\x00\x00\x00\x03xyz"  # records
    )
    assert msg.encode(3) == expected
    decoded = messages.ProduceRequest.decode(expected, 3)
    assert isinstance(decoded.topic_data[0].partition_data[0].records, memoryview)
    assert bytes(decoded.topic_data[0].partition_data[0].records) == b"xyz"


def test_known_layout_flexible_metadata_v12_with_unknown_tag() -> None:
    """Metadata v12 (flexible): compact arrays/strings, uuid, tagged fields; an unknown tag in
    the request survives decode/encode."""
    from protocol.messages.metadata_request import MetadataRequestTopic

    tid = uuid.UUID("0123456789abcdef0123456789abcdef")
    data = (
        b"\x02"  # 1 topic (compact count + 1)
        + tid.bytes
        + b"\x02a"  # compact nullable string "a"
        + b"\x00"  # topic tagged fields
        + b"\x01"  # allow auto topic creation
        + b"\x00"  # include topic authorized operations
        + b"\x01" + b"\x05\x02hi"  # one unknown tag 5 of 2 bytes
    )
    msg = messages.MetadataRequest.decode(data, 12)
    assert msg.topics == [MetadataRequestTopic(topic_id=tid, name="a")]
    assert msg.allow_auto_topic_creation is True
    assert msg._unknown_tagged_fields == [(5, b"hi")]
    assert msg.encode(12) == data


def test_known_tagged_field_is_decoded_and_written_only_when_not_default() -> None:
    """ApiVersions response v3 carries tagged fields (SupportedFeatures=0, FinalizedFeaturesEpoch=1,
    FinalizedFeatures=2, ZkMigrationReady=3): written only when set."""
    resp = messages.ApiVersionsResponse(error_code=0, throttle_time_ms=0)
    plain = resp.encode(3)
    assert plain.endswith(b"\x00")  # no tagged fields
    resp.finalized_features_epoch = 7
    tagged = resp.encode(3)
    assert tagged[len(plain) - 1 :] == b"\x01" + b"\x01" + b"\x08" + (7).to_bytes(8, "big")
    assert messages.ApiVersionsResponse.decode(tagged, 3).finalized_features_epoch == 7


def test_malformed_inputs_raise_decode_error() -> None:
    fetch = messages.FetchRequest
    with pytest.raises(DecodeError):  # huge array count must not loop or allocate
        fetch.decode(b"\xff\xff\xff\xff" + b"\x00\x00\x01\xf4" + b"\x00\x00\x00\x01" + b"\x7f\xff\xff\xff", 4)
    with pytest.raises(DecodeError):  # negative string length
        messages.MetadataRequest.decode(b"\x00\x00\x00\x01\xff\xfe", 1)
    with pytest.raises(DecodeError):  # oversize string length
        messages.MetadataRequest.decode(b"\x00\x00\x00\x01\x7f\xff" + b"a" * 10, 1)
    with pytest.raises(DecodeError):  # over-long unsigned varint
        messages.MetadataRequest.decode(b"\xff\xff\xff\xff\xff\xff\x01", 12)
    with pytest.raises(DecodeError):  # invalid utf-8
        messages.MetadataRequest.decode(b"\x00\x00\x00\x01\x00\x02\xff\xfe", 1)
    with pytest.raises(UnsupportedVersionError):
        messages.ProduceRequest.decode(b"", 99)


def test_random_garbage_never_leaks_other_exceptions() -> None:
    rng = random.Random(1234)
    for cls in sorted(messages.REQUESTS.values(), key=lambda c: c.API_KEY):
        for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            for _ in range(20):
                blob = rng.randbytes(rng.randrange(0, 64))
                try:
                    cls.decode(blob, version)
                except DecodeError:
                    pass


def test_encode_refuses_null_where_not_nullable() -> None:
    with pytest.raises(EncodeError):
        messages.ProduceRequest(topic_data=None).encode(9)
    with pytest.raises(EncodeError):
        messages.ProduceRequest(acks=1 << 20).encode(9)


def test_generated_output_is_current() -> None:
    specs = require_specs()
    proc = subprocess.run(
        [sys.executable, "-m", "protocol.generator", "--check", "--specs", str(specs)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
