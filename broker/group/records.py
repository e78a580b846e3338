"""Record keys and values of `__consumer_offsets`, byte-compatible with Kafka.

The layouts are Kafka's own schemas (GroupMetadataKey/Value, OffsetCommitKey/Value), generated
into `protocol.coordinator` and framed by `protocol.coordinator_records` (an int16 version before
each key and value, as Kafka's `GroupMetadataManager` writes them; a null value, a tombstone,
deletes the key). This module maps them to the group coordinator's own small types and chooses
the versions Kafka 3.9 writes:

* OffsetCommitKey at key version 1 (versions 0 and 1 share the layout; 2 is a group's key).
* OffsetCommitValue v3 (offset, leaderEpoch, metadata, commitTimestamp); v0-v4 are read (v1 has
  an expireTimestamp, v4+ is flexible).
* GroupMetadataKey at key version 2.
* GroupMetadataValue v3 (non-flexible, with currentStateTimestamp and groupInstanceId); v0-v4 are
  read. A v0 member has no rebalance timeout: Kafka takes its session timeout for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.coordinator import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.coordinator.group_metadata_value import MemberMetadata
from protocol.coordinator_records import decode_versioned, encode_versioned, read_version

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


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
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return encode_versioned(key, OFFSET_COMMIT_KEY_VERSION)


def offset_value(v: OffsetValue) -> bytes:
    value = OffsetCommitValue(
        offset=v.offset,
        leader_epoch=v.leader_epoch,
        metadata=v.metadata,
        commit_timestamp=v.commit_timestamp,
    )
    return encode_versioned(value, OFFSET_COMMIT_VALUE_VERSION)


def group_key(group: str) -> bytes:
    return encode_versioned(GroupMetadataKey(group=group), GROUP_METADATA_KEY_VERSION)


def group_value(v: GroupValue) -> bytes:
    members = [
        MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout,
            session_timeout=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in v.members
    ]
    value = GroupMetadataValue(
        protocol_type=v.protocol_type,
        generation=v.generation,
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp=v.current_state_timestamp,
        members=members,
    )
    return encode_versioned(value, GROUP_METADATA_VALUE_VERSION)


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key of a `__consumer_offsets` record; None for versions this broker does not know
    (Kafka skips those too, e.g. KIP-848 records)."""
    version = read_version(buf)
    if OffsetCommitKey.MIN_VERSION <= version <= OffsetCommitKey.MAX_VERSION:
        ok = decode_versioned(OffsetCommitKey, buf)[1]
        return OffsetKey(ok.group, ok.topic, ok.partition)
    if GroupMetadataKey.MIN_VERSION <= version <= GroupMetadataKey.MAX_VERSION:
        return GroupKey(decode_versioned(GroupMetadataKey, buf)[1].group)
    return None


def decode_offset_value(buf: bytes) -> OffsetValue:
    """An offset commit value of any version Kafka has written; `DecodeError` (a ValueError)
    when it is malformed or of an unknown version."""
    v = decode_versioned(OffsetCommitValue, buf)[1]
    return OffsetValue(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def decode_group_value(buf: bytes) -> GroupValue:
    """A group metadata value of any version Kafka has written; `DecodeError` (a ValueError)
    when it is malformed or of an unknown version."""
    version, v = decode_versioned(GroupMetadataValue, buf)
    members = [
        MemberValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.session_timeout if version == 0 else m.rebalance_timeout,
            m.session_timeout,
            bytes(m.subscription),
            bytes(m.assignment),
        )
        for m in v.members
    ]
    return GroupValue(v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp, members)
