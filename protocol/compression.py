"""Compression codecs of Kafka record batches, by the attribute id Kafka stores in a batch.

    id  name    compress writes                       decompress accepts
    0   none    the data unchanged                    anything
    1   gzip    one gzip member (RFC 1952), like      gzip members (several are concatenated);
                Java's GZIPOutputStream               bytes after the last member that do not
                                                      start another member are ignored (Java's
                                                      GZIPInputStream does the same)
    2   snappy  xerial (snappy-java) framing, like    xerial framing (magic ``\\x82SNAPPY\\x00``,
                Kafka's Java client: 16-byte header   int32 version, int32 compatible version,
                then [int32 length][raw snappy        then repeated [int32 length][raw snappy
                block] per 32 KiB of input            block]; the version ints are not checked,
                                                      some writers get their byte order wrong) and
                                                      plain raw snappy (what librdkafka writes)
    3   lz4     one LZ4 frame (the standard frame     one LZ4 frame; bytes after it are ignored,
                format, as in v2 batches), blocks     as Java's Lz4BlockInputStream does
                independent (Java cannot read
                linked blocks)
    4   zstd    one zstd frame with content size      zstd frames, with or without content size,
                                                      several concatenated

Every failure to decompress -- unknown codec id, truncated or corrupt input, output larger than
``max_output_size`` -- raises :class:`RecordsError` (a ``ValueError``); library exceptions
(``zlib.error``, lz4's ``RuntimeError``, ``ZstdError``, snappy's ``UncompressError``) never escape.

``max_output_size`` guards against decompression bombs. gzip, lz4 and snappy never produce more
than the limit (snappy's declared block lengths are checked before decompressing); zstd is fed in
slices of max(1 KiB, limit / 32768) bytes and can expand a slice at most about 32768-fold, so it
may transiently produce up to about max(limit, 32 MiB) more than the limit before refusing.

Default levels when ``level`` is None: gzip zlib's default (6, Kafka's ``Deflater`` default), lz4
the fast level of lz4.frame (Kafka's Java default is 9, which is LZ4-HC and much slower: pass the
topic's ``compression.lz4.level`` when Kafka parity matters), zstd 3 (Kafka's default). Snappy
has no levels.

Pure functions, no I/O; compressor/decompressor contexts are cached per thread.
"""

from __future__ import annotations

import struct
import threading
import zlib

import lz4.frame as _lz4f
import snappy as _snappy
import zstandard as _zstd

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "DEFAULT_MAX_OUTPUT_SIZE",
    "XERIAL_BLOCK_SIZE",
    "XERIAL_MAGIC",
    "RecordsError",
    "codec_id",
    "compress",
    "decompress",
]


class RecordsError(ValueError):
    """Malformed record data: truncated, bad magic or lengths, bad varints, CRC mismatch, corrupt
    compression. The one error type of ``protocol.records`` (re-exported there); defined here so
    that this lower module needs nothing from ``records``."""


CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

CODEC_NAMES: dict[int, str] = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CODEC_IDS: dict[str, int] = {name: cid for cid, name in CODEC_NAMES.items()}
_CODEC_IDS["uncompressed"] = CODEC_NONE  # the broker/topic config spelling of "none"

DEFAULT_MAX_OUTPUT_SIZE = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream's default block size
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible version 1
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)  # 16
_INT32 = struct.Struct(">i")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip container only, as Java's GZIPInputStream

_ZSTD_DEFAULT_LEVEL = 3
# Largest zstd expansion of one input byte is about 2**15 (an RLE block: 4 bytes -> 128 KiB), so
# feeding slices of max_output_size >> 15 bytes bounds the overshoot to about the limit itself.
_ZSTD_MIN_FEED = 1024

_SnappyError = _snappy.UncompressError
_ZstdError = _zstd.ZstdError


def codec_id(name: str) -> int:
    """The attribute id of a codec name (case-insensitive; "uncompressed" means none)."""
    try:
        return _CODEC_IDS[name.lower()]
    except (KeyError, AttributeError):
        raise RecordsError(f"unknown compression codec name {name!r}") from None


# ---------------------------------------------------------------------------------------------
# per-thread contexts


class _Contexts(threading.local):
    def __init__(self) -> None:
        self.zstd_compressors: dict[int, _zstd.ZstdCompressor] = {}
        self.zstd_decompressor = _zstd.ZstdDecompressor()


_ctx = _Contexts()


def _zstd_compressor(level: int) -> _zstd.ZstdCompressor:
    cctx = _ctx.zstd_compressors.get(level)
    if cctx is None:
        cctx = _ctx.zstd_compressors[level] = _zstd.ZstdCompressor(level=level)
    return cctx


# ---------------------------------------------------------------------------------------------
# compress


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` with codec ``codec`` (see the module docstring for the exact framing)."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        return zlib.compress(data, -1 if level is None else level, _GZIP_WBITS)
    if codec == CODEC_SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == CODEC_LZ4:
        return _lz4f.compress(
            data, compression_level=0 if level is None else level, block_linked=False
        )
    if codec == CODEC_ZSTD:
        return _zstd_compressor(_ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)
    raise RecordsError(f"unknown compression codec id {codec}")


def _snappy_xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    raw = _snappy.compress
    pack = _INT32.pack
    parts = [_XERIAL_HEADER]
    if n == 0:
        # One empty block rather than a bare header: librdkafka only recognises the framing
        # when at least one block length follows the header.
        block = raw(b"")
        parts += (pack(len(block)), block)
    for start in range(0, n, XERIAL_BLOCK_SIZE):
        block = raw(mv[start : start + XERIAL_BLOCK_SIZE])
        parts += (pack(len(block)), block)
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# decompress


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> bytes:
    """Decompress ``data`` written with codec ``codec``; at most ``max_output_size`` bytes out.

    Raises RecordsError for an unknown codec, corrupt or truncated input, or too much output.
    """
    try:
        if codec == CODEC_NONE:
            out = bytes(data)
        elif codec == CODEC_GZIP:
            out = _gunzip(data, max_output_size)
        elif codec == CODEC_SNAPPY:
            out = _snappy_decompress(data, max_output_size)
        elif codec == CODEC_LZ4:
            out = _lz4_decompress(data, max_output_size)
        elif codec == CODEC_ZSTD:
            out = _zstd_decompress(data, max_output_size)
        else:
            raise RecordsError(f"unknown compression codec id {codec}")
    except RecordsError:
        raise
    except (zlib.error, _SnappyError, _ZstdError, RuntimeError, ValueError, OverflowError) as e:
        name = CODEC_NAMES.get(codec, codec)
        raise RecordsError(f"corrupt {name} data: {type(e).__name__}: {e}") from e
    if len(out) > max_output_size:
        raise _too_large(codec, max_output_size)
    return out


def _too_large(codec: int, limit: int) -> RecordsError:
    return RecordsError(f"{CODEC_NAMES[codec]} data decompresses to more than {limit} bytes")


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    rest = data
    parts: list[bytes] = []
    total = 0
    while True:
        d = zlib.decompressobj(_GZIP_WBITS)
        chunk = d.decompress(rest, limit - total + 1)
        total += len(chunk)
        if total > limit:
            raise _too_large(CODEC_GZIP, limit)
        parts.append(chunk)
        if not d.eof:
            raise RecordsError("corrupt gzip data: truncated stream")
        rest = d.unused_data
        if rest[:2] != _GZIP_MAGIC:
            break  # end of input, or trailing bytes that are no gzip member: ignored, as Java
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_raw_length(block: bytes | bytearray | memoryview) -> int:
    """Uncompressed length declared by a raw snappy block (its leading unsigned varint)."""
    result = 0
    shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise RecordsError("corrupt snappy data: bad uncompressed-length preamble")


def _snappy_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    uncompress = _snappy.uncompress
    if n < _XERIAL_HEADER_SIZE or mv[:8] != XERIAL_MAGIC:
        if _snappy_raw_length(mv) > limit:
            raise _too_large(CODEC_SNAPPY, limit)
        return uncompress(mv)
    # xerial framing; the version ints at 8..16 are ignored
    pos = _XERIAL_HEADER_SIZE
    parts: list[bytes] = []
    total = 0
    unpack_int = _INT32.unpack_from
    while pos < n:
        if n - pos < 4:
            raise RecordsError("corrupt snappy data: truncated xerial block length")
        (length,) = unpack_int(mv, pos)
        pos += 4
        if length < 0 or length > n - pos:
            raise RecordsError(
                f"corrupt snappy data: xerial block length {length} with {n - pos} bytes left"
            )
        block = mv[pos : pos + length]
        pos += length
        total += _snappy_raw_length(block)
        if total > limit:
            raise _too_large(CODEC_SNAPPY, limit)
        parts.append(uncompress(block))
    return b"".join(parts)


def _lz4_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    d = _lz4f.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise _too_large(CODEC_LZ4, limit)
    if not d.eof:
        raise RecordsError("corrupt lz4 data: truncated frame")
    return out


def _zstd_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    if n == 0:
        raise RecordsError("corrupt zstd data: empty input")
    dctx = _ctx.zstd_decompressor
    feed = max(_ZSTD_MIN_FEED, limit >> 15)
    parts: list[bytes] = []
    total = 0
    pos = 0
    while pos < n:  # one zstd frame per iteration
        dobj = dctx.decompressobj()
        while True:
            end = min(n, pos + feed)
            chunk = dobj.decompress(mv[pos:end])
            if chunk:
                total += len(chunk)
                if total > limit:
                    raise _too_large(CODEC_ZSTD, limit)
                parts.append(chunk)
            if dobj.eof:
                pos = end - len(dobj.unused_data)
                break
            if end == n:
                raise RecordsError("corrupt zstd data: truncated frame")
            pos = end
    return parts[0] if len(parts) == 1 else b"".join(parts)
