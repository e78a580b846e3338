"""storage.checkpoints: Kafka's checkpoint, partition.metadata, meta.properties and clean-shutdown
files.

Oracles: golden bytes written by hand from Kafka's writers (CheckpointFile.CheckpointWriteBuffer,
PartitionMetadata.encode, Properties.store, CleanShutdownFileHandler), and Kafka's reader rules
(CheckpointReadBuffer, PartitionMetadataReadBuffer, MetaProperties.Builder).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import checkpoints as C
from storage.checkpoints import (
    CheckpointFormatError,
    CleanShutdownFileHandler,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadata,
    PartitionMetadataFile,
    kafka_uuid_str,
    parse_kafka_uuid,
)

# ---------------------------------------------------------------------------------------------
# file names


def test_file_names_are_kafkas():
    assert C.RECOVERY_POINT_CHECKPOINT_FILE == "recovery-point-offset-checkpoint"
    assert C.REPLICATION_OFFSET_CHECKPOINT_FILE == "replication-offset-checkpoint"
    assert C.LOG_START_OFFSET_CHECKPOINT_FILE == "log-start-offset-checkpoint"
    assert C.CLEANER_OFFSET_CHECKPOINT_FILE == "cleaner-offset-checkpoint"
    assert C.LEADER_EPOCH_CHECKPOINT_FILE == "leader-epoch-checkpoint"
    assert C.PARTITION_METADATA_FILE == "partition.metadata"
    assert C.META_PROPERTIES_FILE == "meta.properties"
    assert C.CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"


# ---------------------------------------------------------------------------------------------
# OffsetCheckpointFile


def test_offset_checkpoint_golden_bytes(tmp_path):
    path = tmp_path / C.RECOVERY_POINT_CHECKPOINT_FILE
    f = OffsetCheckpointFile(path)
    f.write({("orders", 1): 7, ("audit-log", 0): 42, ("audit-log", 10): 5})
    assert path.read_bytes() == b"0\n3\naudit-log 0 42\naudit-log 10 5\norders 1 7\n"
    assert not (tmp_path / (path.name + ".tmp")).exists()
    assert f.read() == {("orders", 1): 7, ("audit-log", 0): 42, ("audit-log", 10): 5}


def test_offset_checkpoint_empty_golden(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "cp")
    f.write({})
    assert (tmp_path / "cp").read_bytes() == b"0\n0\n"
    assert f.read() == {}


def test_construction_creates_an_empty_file_like_kafka(tmp_path):
    path = tmp_path / C.REPLICATION_OFFSET_CHECKPOINT_FILE
    f = OffsetCheckpointFile(path)
    assert path.exists() and path.read_bytes() == b""
    assert f.read() == {}
    path.write_bytes(b"0\n1\nt 0 9\n")
    OffsetCheckpointFile(path)  # an existing file is left alone
    assert path.read_bytes() == b"0\n1\nt 0 9\n"
    g = OffsetCheckpointFile(tmp_path / "other", create=False)
    assert not (tmp_path / "other").exists()
    assert g.read() == {}


def test_offset_checkpoint_reads_what_java_readers_accept(tmp_path):
    path = tmp_path / "cp"
    f = OffsetCheckpointFile(path)
    cases = {
        b"0": {},  # version only
        b"0\n": {},
        b"0\r\n2\r\nt\t0   5\r\nu 3 -1  \r\n": {("t", 0): 5, ("u", 3): -1},
        b"0\n1\nt 0 5": {("t", 0): 5},  # no final newline
        b"0\n1\nt +1 +9\n": {("t", 1): 9},
        b"0\n2\nt 0 5\nt 0 6\n": {("t", 0): 6},  # later line wins, as in a HashMap
    }
    for data, expected in cases.items():
        path.write_bytes(data)
        assert f.read() == expected, data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"1\n0\n", "Unrecognised version:1, expected version: 0 in checkpoint file at: "),
        (b"x\n", "Malformed line in checkpoint file ["),
        (b"0\nzz\n", "]: zz"),
        (b"0\n-1\n", "]: -1"),
        (b"0\n1\nt 0\n", "]: t 0"),
        (b"0\n1\nt x 1\n", "]: t x 1"),
        (b"0\n1\nt 0 1 2\n", "]: t 0 1 2"),
        (b"0\n1\n t 0 1\n", "]:  t 0 1"),  # Java keeps the leading empty field
        (b"0\n1\nt 0 99999999999999999999\n", "Malformed line"),  # beyond Long
        (b"0\n1\nt 2147483648 1\n", "Malformed line"),  # beyond Integer
        (b"0\n2\nt 0 1\n", "Expected [2] entries in checkpoint file ["),
        (b"0\n1\nt 0 1\n\n", "Malformed line in checkpoint file ["),  # empty line is an entry
        (b"0\n1\nt 0 \xff\n", "not UTF-8"),
    ],
)
def test_malformed_offset_checkpoints_raise_clear_errors(tmp_path, data, message):
    path = tmp_path / "cp"
    path.write_bytes(data)
    with pytest.raises(CheckpointFormatError) as info:
        OffsetCheckpointFile(path).read()
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert isinstance(info.value, OSError)  # Kafka raises IOException


def test_offset_checkpoint_rejects_unwritable_topics(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "cp")
    with pytest.raises(ValueError):
        f.write({("has space", 0): 1})
    with pytest.raises(ValueError):
        f.write({("", 0): 1})


topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=20,
)


@settings(deadline=None)
@given(
    st.dictionaries(
        st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=8
    )
)
def test_offset_checkpoint_round_trip(tmp_path_factory, offsets):
    path = tmp_path_factory.mktemp("cp") / "cp"
    f = OffsetCheckpointFile(path)
    f.write(offsets, sync=False)
    assert f.read() == offsets


def test_write_is_atomic_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    f = OffsetCheckpointFile(path)
    f.write({("t", 0): 1})

    def boom(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(C.os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        f.write({("t", 0): 2})
    monkeypatch.undo()
    assert path.read_bytes() == b"0\n1\nt 0 1\n"
    assert not (tmp_path / "cp.tmp").exists()


def test_a_stale_tmp_file_does_not_matter(tmp_path):
    path = tmp_path / "cp"
    (tmp_path / "cp.tmp").write_bytes(b"garbage from a crash")
    f = OffsetCheckpointFile(path)
    f.write({("t", 0): 3})
    assert f.read() == {("t", 0): 3}
    assert not (tmp_path / "cp.tmp").exists()


# ---------------------------------------------------------------------------------------------
# LeaderEpochCheckpointFile


def test_leader_epoch_checkpoint_golden_bytes(tmp_path):
    path = LeaderEpochCheckpointFile.new_file(tmp_path)
    assert path.name == "leader-epoch-checkpoint"
    f = LeaderEpochCheckpointFile(path)
    f.write([EpochEntry(0, 0), EpochEntry(3, 100), EpochEntry(7, 12345678901)])
    assert path.read_bytes() == b"0\n3\n0 0\n3 100\n7 12345678901\n"
    assert f.read() == [EpochEntry(0, 0), EpochEntry(3, 100), EpochEntry(7, 12345678901)]
    f.write([])
    assert path.read_bytes() == b"0\n0\n"
    assert f.read() == []


@pytest.mark.parametrize(
    "data",
    [b"0\n1\n1\n", b"0\n1\n1 2 3\n", b"0\n1\nx 2\n", b"0\n1\n1 y\n", b"2\n0\n", b"0\n3\n1 2\n"],
)
def test_malformed_leader_epoch_checkpoints(tmp_path, data):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CheckpointFormatError):
        LeaderEpochCheckpointFile(path).read()


# ---------------------------------------------------------------------------------------------
# Kafka Uuid


def test_kafka_uuid_golden():
    u = uuid.UUID(bytes=bytes(range(16)))
    assert kafka_uuid_str(u) == "AAECAwQFBgcICQoLDA0ODw"
    assert kafka_uuid_str(uuid.UUID(int=2**128 - 1)) == "_" * 21 + "w"  # URL-safe alphabet
    assert parse_kafka_uuid("AAECAwQFBgcICQoLDA0ODw") == u
    assert parse_kafka_uuid("AAECAwQFBgcICQoLDA0ODw==") == u  # Java's decoder accepts padding
    assert parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAA") == C.ZERO_UUID


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAECAwQFBgcICQoLDA0OD",
        "AAECAwQFBgcICQoLDA0ODwA",
        "AAECAwQFBgcICQoLDA0OD/",
        "AAECAwQFBgcICQoLDA0OD+",
        "AAECAwQFBgcICQoLDA0ODw=",
        " AAECAwQFBgcICQoLDA0ODw",
    ],
)
def test_parse_kafka_uuid_rejects(text):
    with pytest.raises(ValueError):
        parse_kafka_uuid(text)


@given(st.uuids(version=None) | st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)))
def test_kafka_uuid_round_trip(u):
    s = kafka_uuid_str(u)
    assert len(s) == 22
    assert parse_kafka_uuid(s) == u


# ---------------------------------------------------------------------------------------------
# partition.metadata


def test_partition_metadata_golden_bytes(tmp_path):
    path = PartitionMetadataFile.new_file(tmp_path)
    assert path.name == "partition.metadata"
    f = PartitionMetadataFile(path)
    assert not f.exists()
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    f.write(topic_id)
    assert path.read_bytes() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert f.read() == PartitionMetadata(0, topic_id)
    f.delete()
    assert not f.exists()


def test_partition_metadata_record_then_flush(tmp_path):
    f = PartitionMetadataFile(tmp_path / "partition.metadata")
    a, b = uuid.uuid4(), uuid.uuid4()
    f.maybe_flush()
    assert not f.exists()
    f.record(a)
    f.record(a)
    with pytest.raises(ValueError, match="already recorded"):
        f.record(b)
    f.maybe_flush()
    assert f.read().topic_id == a


def test_partition_metadata_accepts_newer_versions_and_extra_lines(tmp_path):
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\nfuture: stuff\n")
    assert PartitionMetadataFile(path).read() == PartitionMetadata(
        1, uuid.UUID(bytes=bytes(range(16)))
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "Malformed line in partition metadata file ["),
        (b"version: 0\n", "]: None"),
        (b"version:0\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "]: version:0"),
        (b"version: x\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "]: version: x"),
        (b"vers: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "]: vers: 0"),
        (b"version: -1\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "Unrecognized version"),
        (b"version: 0\ntopic: AAECAwQFBgcICQoLDA0ODw", "]: topic: "),
        (b"version: 0\ntopic_id: not-a-uuid", "]: topic_id: not-a-uuid"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "Invalid topic ID"),
    ],
)
def test_malformed_partition_metadata(tmp_path, data, message):
    path = tmp_path / "partition.metadata"
    path.write_bytes(data)
    with pytest.raises(CheckpointFormatError) as info:
        PartitionMetadataFile(path).read()
    assert message in str(info.value)


def test_partition_metadata_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        PartitionMetadataFile(tmp_path / "partition.metadata").read()


# ---------------------------------------------------------------------------------------------
# meta.properties

WHEN = dt.datetime(2024, 3, 14, 10, 0, 0, tzinfo=dt.UTC)


def test_meta_properties_v0_golden_bytes(tmp_path):
    path = tmp_path / "meta.properties"
    meta = MetaProperties(version=0, cluster_id="Ys5_CZ4vRpWb6-5UoFrjdw", node_id=0)
    C.write_meta_properties(path, meta, now=WHEN)
    assert path.read_bytes() == (
        b"#\n"
        b"#Thu Mar 14 10:00:00 UTC 2024\n"
        b"broker.id=0\n"
        b"cluster.id=Ys5_CZ4vRpWb6-5UoFrjdw\n"
        b"version=0\n"
    )
    assert C.read_meta_properties(path) == meta


def test_meta_properties_v1_golden_bytes(tmp_path):
    path = tmp_path / "meta.properties"
    meta = MetaProperties(
        version=1,
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        node_id=3,
        directory_id=uuid.UUID(bytes=bytes(range(16))),
    )
    C.write_meta_properties(path, meta, now=dt.datetime(1970, 1, 1))
    assert path.read_bytes() == (
        b"#\n"
        b"#Thu Jan 01 00:00:00 UTC 1970\n"
        b"cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
        b"directory.id=AAECAwQFBgcICQoLDA0ODw\n"
        b"node.id=3\n"
        b"version=1\n"
    )
    assert C.read_meta_properties(path) == meta


def test_reads_meta_properties_as_kafka_3x_zk_mode_writes_it(tmp_path):
    # JDK 17 Properties.store: hash order, local time zone in the date comment
    path = tmp_path / "meta.properties"
    path.write_bytes(
        b"#\n#Tue Aug 29 14:03:11 CEST 2023\ncluster.id=q1Sh-9_ISia_wwGXbGq1OQ\nversion=0\n"
        b"broker.id=1\n"
    )
    assert C.read_meta_properties(path) == MetaProperties(0, "q1Sh-9_ISia_wwGXbGq1OQ", 1)


def test_meta_properties_v0_fields_are_optional(tmp_path):
    path = tmp_path / "meta.properties"
    path.write_bytes(b"version=0\n")
    assert C.read_meta_properties(path) == MetaProperties(0, None, None, None)
    path.write_bytes(b"broker.id=5\n")  # version defaults to 0
    assert C.read_meta_properties(path) == MetaProperties(0, None, 5, None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"version=2\n", "Unknown meta.properties version number"),
        (b"version=0\nbroker.id=x\n", "Unable to read broker.id as a base-10 number"),
        (b"version=1\ncluster.id=c\n", "Failed to find node.id"),
        (b"version=1\nnode.id=1\n", "cluster.id was not found"),
        (b"version=0\ndirectory.id=zz\n", "Unable to read directory.id as a Uuid"),
    ],
)
def test_invalid_meta_properties(tmp_path, data, message):
    path = tmp_path / "meta.properties"
    path.write_bytes(data)
    with pytest.raises(CheckpointFormatError, match=message):
        C.read_meta_properties(path)


def test_meta_properties_constructor_validates():
    with pytest.raises(ValueError):
        MetaProperties(version=1, cluster_id="c")
    with pytest.raises(ValueError):
        MetaProperties(version=3)


def test_java_properties_parsing_rules():
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d = spaced value \n"
        "e=con\\\n"
        "     tinued\n"
        "f\\=g=h\\:i\n"
        "j=\\u00e9\\t\\n\n"
        "k\n"
        "l=\\\\\n"
        "m=x\\\n"
    )
    assert C.decode_java_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "spaced value ",
        "e": "continued",
        "f=g": "h:i",
        "j": "é\t\n",
        "k": "",
        "l": "\\",
        "m": "x",
    }


def test_java_properties_escaping_golden():
    out = C.encode_java_properties(
        {" k y": " v=a:l#u!e\\", "x": "é\n"}, now=dt.datetime(2000, 2, 29, 23, 59, 59)
    )
    assert out == (
        b"#\n#Tue Feb 29 23:59:59 UTC 2000\n\\ k\\ y=\\ v\\=a\\:l\\#u\\!e\\\\\nx=\\u00E9\\n\n"
    )


@given(st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=10), max_size=5))
def test_java_properties_round_trip(props):
    data = C.encode_java_properties(props, now=WHEN)
    assert C.decode_java_properties(data.decode("latin-1")) == props


# ---------------------------------------------------------------------------------------------
# clean shutdown marker


def test_clean_shutdown_marker_empty_like_kafka_3_0_to_3_6(tmp_path):
    h = CleanShutdownFileHandler(tmp_path)
    assert h.path == tmp_path / ".kafka_cleanshutdown"
    assert not h.exists()
    assert h.read() is None
    h.write()
    assert h.exists()
    assert h.path.read_bytes() == b""
    assert h.read() is None
    h.delete()
    assert not h.exists()
    h.delete()  # deleting a missing marker is fine


def test_clean_shutdown_marker_with_broker_epoch_like_kafka_3_7(tmp_path):
    h = CleanShutdownFileHandler(tmp_path)
    h.write(42)
    assert h.path.read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert h.read() == 42
    h.path.write_bytes(b'{"version":-1,"brokerEpoch":42}')
    assert h.read() is None
    h.path.write_bytes(b"not json")
    assert h.read() is None
    assert h.exists()


def test_fsync_dir_tolerates_missing_directories(tmp_path):
    C.fsync_dir(tmp_path / "nope")
    C.fsync_dir(tmp_path)
    assert os.path.isdir(tmp_path)
