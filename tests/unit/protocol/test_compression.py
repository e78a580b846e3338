"""protocol.compression: round trips, framing details, interop with kafka-python's codecs (an
independent implementation), corrupt input and decompression bombs."""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text at import time
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kcodec

from protocol import compression as C
from protocol.compression import RecordsError, codec_id, compress, decompress

CODECS = [0, 1, 2, 3, 4]
COMPRESSED = [1, 2, 3, 4]

# Mostly compressible data of varied sizes (repetition plus some noise).
payloads = st.one_of(
    st.binary(max_size=2000),
    st.builds(lambda chunk, n: chunk * n, st.binary(min_size=1, max_size=50), st.integers(1, 3000)),
)


def _sample(n: int = 200_000) -> bytes:
    return b"".join(b"record %d value %d; " % (i, i * 7 % 13) for i in range(n // 20))[:n]


# ---------------------------------------------------------------------------------------------
# names and ids


def test_codec_names_and_ids():
    assert C.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    for cid, name in C.CODEC_NAMES.items():
        assert codec_id(name) == cid
        assert codec_id(name.upper()) == cid
    assert codec_id("uncompressed") == 0


@pytest.mark.parametrize("name", ["", "brotli", "producer", "gz"])
def test_unknown_codec_name(name):
    with pytest.raises(RecordsError):
        codec_id(name)


@pytest.mark.parametrize("cid", [-1, 5, 6, 7, 100])
def test_unknown_codec_id(cid):
    with pytest.raises(RecordsError, match="unknown compression codec"):
        compress(cid, b"data")
    with pytest.raises(RecordsError, match="unknown compression codec"):
        decompress(cid, b"data")


def test_records_error_is_value_error():
    assert issubclass(RecordsError, ValueError)
    from protocol import records

    assert records.RecordsError is RecordsError


# ---------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(data=payloads)
def test_round_trip(codec, data):
    z = compress(codec, data)
    assert isinstance(z, bytes)
    assert decompress(codec, z) == data
    # memoryview in, both ways, including a slice that does not start at 0
    padded = b"xx" + data + b"yy"
    zm = compress(codec, memoryview(padded)[2 : 2 + len(data)])
    assert decompress(codec, memoryview(b"!" + zm)[1:]) == data


@pytest.mark.parametrize(
    ("codec", "levels"), [(1, [1, 6, 9]), (3, [0, 3, 9, 16]), (4, [-5, 1, 3, 19])]
)
def test_levels(codec, levels):
    data = _sample(50_000)
    sizes = []
    for level in levels:
        z = compress(codec, data, level)
        assert decompress(codec, z) == data
        sizes.append(len(z))
    assert sizes[-1] < len(data)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_and_large(codec):
    assert decompress(codec, compress(codec, b"")) == b""
    big = _sample(3_000_000)
    assert decompress(codec, compress(codec, big)) == big


# ---------------------------------------------------------------------------------------------
# framing: what we write


def test_gzip_writes_a_gzip_member():
    z = compress(1, b"hello" * 100)
    assert z[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(z) == b"hello" * 100


def test_lz4_writes_standard_frame_with_independent_blocks():
    data = _sample(300_000)
    z = compress(3, data)
    assert z[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    flg = z[4]
    assert flg >> 6 == 0b01  # frame format version 01
    assert flg & 0x20  # block independence: Kafka's Java reader decompresses blocks separately
    assert lz4.frame.decompress(z) == data


def test_zstd_writes_one_standard_frame():
    data = _sample(100_000)
    z = compress(4, data)
    assert z[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(z) == data


def _parse_xerial(z: bytes) -> tuple[int, int, list[bytes]]:
    assert z[:8] == b"\x82SNAPPY\x00"
    version, compat = struct.unpack(">ii", z[8:16])
    blocks = []
    pos = 16
    while pos < len(z):
        (n,) = struct.unpack(">i", z[pos : pos + 4])
        blocks.append(z[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(z)
    return version, compat, blocks


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = _sample(100_000)
    version, compat, blocks = _parse_xerial(compress(2, data))
    assert (version, compat) == (1, 1)
    assert len(blocks) == 4  # 32768 * 3 < 100000 <= 32768 * 4
    raw = [snappy.uncompress(b) for b in blocks]
    assert [len(r) for r in raw] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(raw) == data


def test_snappy_empty_input_still_has_a_block():
    # librdkafka only recognises xerial framing when a block length follows the 16-byte header
    z = compress(2, b"")
    assert len(z) > 20
    assert _parse_xerial(z)[2] == [snappy.compress(b"")]


# ---------------------------------------------------------------------------------------------
# framing: what we accept


def test_snappy_accepts_hand_built_xerial_stream():
    parts = [b"first block " * 50, b"second " * 10, b"", b"third" * 999]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for p in parts:
        block = snappy.compress(p)
        framed += struct.pack(">i", len(block)) + block
    assert decompress(2, framed) == b"".join(parts)


def test_snappy_accepts_xerial_with_odd_version_fields():
    # kafka-python ignores the version ints (redpanda once wrote them little-endian); so do we
    block = snappy.compress(b"payload" * 30)
    for header_ints in (struct.pack("<ii", 1, 1), struct.pack(">ii", 0, 0)):
        framed = b"\x82SNAPPY\x00" + header_ints + struct.pack(">i", len(block)) + block
        assert decompress(2, framed) == b"payload" * 30


def test_snappy_accepts_raw_block():
    data = _sample(80_000)
    assert decompress(2, snappy.compress(data)) == data
    assert decompress(2, cramjam.snappy.compress_raw(data).read()) == data


def test_zstd_accepts_frame_without_content_size():
    data = _sample(500_000)
    z = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.frame_content_size(z) == -1
    assert decompress(4, z) == data
    cobj = zstandard.ZstdCompressor().compressobj()  # streaming, as zstd-jni / librdkafka
    z2 = cobj.compress(data) + cobj.flush()
    assert zstandard.frame_content_size(z2) == -1
    assert decompress(4, z2) == data


def test_zstd_accepts_concatenated_frames():
    a, b = _sample(70_000), b"second frame" * 100
    cctx = zstandard.ZstdCompressor()
    assert decompress(4, cctx.compress(a) + cctx.compress(b)) == a + b


def test_gzip_accepts_concatenated_members_and_ignores_trailing_garbage():
    a, b = b"first" * 100, b"second" * 100
    z = gzip.compress(a) + gzip.compress(b)
    assert decompress(1, z) == a + b
    assert decompress(1, z + b"\x00\x00junk") == a + b  # Java's GZIPInputStream ignores it too


def test_gzip_rejects_zlib_container():
    with pytest.raises(RecordsError):
        decompress(1, zlib.compress(b"not gzip" * 10))


def test_lz4_accepts_linked_blocks_and_checksums():
    data = _sample(300_000)
    z = lz4.frame.compress(data, block_linked=True, content_checksum=True, store_size=False)
    assert decompress(3, z) == data


# ---------------------------------------------------------------------------------------------
# interop with kafka-python's codec module (kafka-python 3.0.12)


@pytest.mark.parametrize(
    ("codec", "k_encode", "k_decode"),
    [
        (1, kcodec.gzip_encode, kcodec.gzip_decode),
        (2, kcodec.snappy_encode, kcodec.snappy_decode),
        (3, kcodec.lz4_encode, kcodec.lz4_decode),
        (4, kcodec.zstd_encode, kcodec.zstd_decode),
    ],
)
@pytest.mark.parametrize("size", [0, 1, 1000, 32768, 100_001])
def test_kafka_python_interop(codec, k_encode, k_decode, size):
    data = _sample(size) if size > 1 else b"x" * size
    assert decompress(codec, k_encode(data)) == data
    assert k_decode(compress(codec, data)) == data


def test_kafka_python_raw_snappy():
    data = _sample(10_000)
    assert decompress(2, kcodec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(2, kcodec.snappy_encode(data, xerial_blocksize=1000)) == data


# ---------------------------------------------------------------------------------------------
# corrupt and hostile input


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_input_raises(codec):
    data = _sample(40_000)
    z = compress(codec, data)
    cuts = {0, 1, 2, 4, 8, 15, 16, 17, 20, len(z) // 2, len(z) - 4, len(z) - 1}
    if codec == 2:
        # xerial framing has no end marker: a cut exactly between blocks is a valid, shorter
        # stream (the record count check of the batch catches that); cut anywhere else
        boundaries, pos = {16}, 16
        while pos < len(z):
            pos += 4 + struct.unpack(">i", z[pos : pos + 4])[0]
            boundaries.add(pos)
        cuts -= boundaries
    for cut in sorted(cuts):
        try:
            out = decompress(codec, z[:cut])
        except RecordsError:
            continue
        pytest.fail(f"codec {codec}: {cut}-byte prefix decompressed to {len(out)} bytes")


@pytest.mark.parametrize("codec", COMPRESSED)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=300))
def test_garbage_raises_records_error_only(codec, garbage):
    try:
        decompress(codec, garbage, max_output_size=1 << 20)
    except RecordsError:
        pass


@pytest.mark.parametrize("codec", COMPRESSED)
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_input_raises_records_error_only(codec, data):
    original = _sample(3000)
    z = bytearray(compress(codec, original))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(z) - 1))
        z[i] = data.draw(st.integers(0, 255))
    try:
        decompress(codec, bytes(z), max_output_size=1 << 20)
    except RecordsError:
        pass


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_checksummed_codecs_detect_a_flipped_bit(codec):
    data = _sample(20_000)
    if codec == 3:
        z = bytearray(lz4.frame.compress(data, content_checksum=True, block_linked=False))
    elif codec == 4:
        z = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    else:
        z = bytearray(compress(codec, data))
    z[len(z) // 2] ^= 0x10
    with pytest.raises(RecordsError):
        decompress(codec, bytes(z))


@pytest.mark.parametrize("codec", COMPRESSED)
def test_decompression_bomb_refused(codec):
    bomb = compress(codec, bytes(16 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(RecordsError, match="decompresses to more than"):
        decompress(codec, bomb, max_output_size=1 << 20)
    assert len(decompress(codec, bomb, max_output_size=16 << 20)) == 16 << 20
    with pytest.raises(RecordsError, match="decompresses to more than"):
        decompress(codec, bomb, max_output_size=(16 << 20) - 1)


def test_bomb_refused_for_zstd_without_content_size_and_raw_snappy():
    cobj = zstandard.ZstdCompressor().compressobj()
    z = cobj.compress(bytes(64 << 20)) + cobj.flush()
    with pytest.raises(RecordsError, match="more than"):
        decompress(4, z, max_output_size=1 << 20)
    raw = snappy.compress(bytes(4 << 20))
    with pytest.raises(RecordsError, match="more than"):
        decompress(2, raw, max_output_size=1 << 20)


def test_xerial_bad_block_lengths():
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    block = snappy.compress(b"abc" * 100)
    for bad in (
        header + struct.pack(">i", -1) + block,
        header + struct.pack(">i", len(block) + 1) + block,
        header + struct.pack(">i", len(block)) + block + b"\x00\x00",
        header + struct.pack(">i", 3) + b"\xff\xff\xff",
    ):
        with pytest.raises(RecordsError):
            decompress(2, bad)
