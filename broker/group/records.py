"""Record keys and values of `__consumer_offsets`, byte-compatible with Kafka.

Hand-written because these specs are not among the protocol JSON files in ../shared. The layouts
are Apache Kafka's `group-coordinator/src/main/resources/common/message/`:

* OffsetCommitKey (key version 0/1, non-flexible): group string, topic string, partition int32.
* OffsetCommitValue v3 (non-flexible; v4+ is flexible): offset int64, leaderEpoch int32,
  metadata string, commitTimestamp int64. (v1 adds expireTimestamp int64 after commitTimestamp;
  v0 and v2 have no leaderEpoch.) Decoding accepts v0-v3.
* GroupMetadataKey (key version 2): group string.
* GroupMetadataValue v3 (non-flexible): protocolType string, generation int32, protocol nullable
  string, leader nullable string, currentStateTimestamp int64, members [MemberMetadata]:
  memberId string, groupInstanceId nullable string, clientId string, clientHost string,
  rebalanceTimeout int32, sessionTimeout int32, subscription bytes, assignment bytes.
  Decoding accepts v0-v3 (v1 adds rebalanceTimeout, v2 currentStateTimestamp, v3
  groupInstanceId).

Each key and value starts with its int16 version, as Kafka's `GroupMetadataManager` writes them.
A tombstone (null value) deletes the key. Strings are int16-length UTF-8, -1 = null; bytes are
int32-length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> _Writer:
        self.buf += _h.pack(v)
        return self

    def int32(self, v: int) -> _Writer:
        self.buf += _i.pack(v)
        return self

    def int64(self, v: int) -> _Writer:
        self.buf += _q.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        b = v.encode()
        self.int16(len(b))
        self.buf += b
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.int32(len(v))
        self.buf += v
        return self


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("truncated __consumer_offsets record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def int16(self) -> int:
        return _h.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _i.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _q.unpack(self._take(8))[0]

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._take(n).decode()

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else bytes(self._take(n))


@dataclass(slots=True, frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic).int32(partition).buf)


def offset_value(v: OffsetValue) -> bytes:
    w = _Writer().int16(OFFSET_COMMIT_VALUE_VERSION)
    w.int64(v.offset).int32(v.leader_epoch).string(v.metadata).int64(v.commit_timestamp)
    return bytes(w.buf)


def group_key(group: str) -> bytes:
    return bytes(_Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).buf)


def group_value(v: GroupValue) -> bytes:
    w = _Writer().int16(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type).int32(v.generation).string(v.protocol).string(v.leader)
    w.int64(v.current_state_timestamp).int32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.int32(m.rebalance_timeout).int32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key of a `__consumer_offsets` record; None for versions this broker does not know
    (Kafka skips those too, e.g. KIP-848 records)."""
    r = _Reader(buf)
    version = r.int16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return OffsetKey(group or "", topic or "", r.int32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None


def decode_offset_value(buf: bytes) -> OffsetValue:
    r = _Reader(buf)
    version = r.int16()
    if not 0 <= version <= 3:
        raise ValueError(f"unknown offset commit value version {version}")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    return OffsetValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def decode_group_value(buf: bytes) -> GroupValue:
    r = _Reader(buf)
    version = r.int16()
    if not 0 <= version <= 3:
        raise ValueError(f"unknown group metadata value version {version}")
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session = r.int32()
        rebalance = session
        if version >= 1:
            rebalance, session = session, r.int32()
        members.append(
            MemberValue(member_id, instance, client_id, client_host, rebalance, session, r.bytes_(), r.bytes_())
        )
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)
