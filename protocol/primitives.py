"""Wire primitives shared by the generated message codecs (`protocol/messages/`).

Why this module exists: the generator emits straight-line code that unpacks runs of fixed-width
fields with one precompiled `struct.Struct` call each; everything of variable length (strings,
bytes, arrays, varints, tagged fields) goes through the small helpers below, so the generated code
stays short and every bounds check lives in one place.

Error model: a decoder may raise `struct.error`, `IndexError`, `UnicodeDecodeError` or
`DecodeError` while walking a buffer; the public entry points (`Message.decode`, the framing
functions) translate all of them into one `DecodeError`. This is the "sticky error, one check at
the end" of franz-go's kbin.Reader, done with Python's zero-cost exception handling so the happy
path pays nothing. Lengths are checked against the remaining buffer before slicing (Python slices
silently truncate) and array counts are checked against the bytes left (each element takes at
least one byte), so a hostile count can neither read past the frame nor make a decoder loop
billions of times.

Decoded `records` fields are memoryview slices of the request buffer: zero copies on the produce
and fetch paths. `bytes` fields are copied into `bytes` (they are small: group metadata, SASL).
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = [
    "ZERO_UUID",
    "DecodeError",
    "EncodeError",
    "Field",
    "Message",
]


class DecodeError(ValueError):
    """The one error raised for any malformed, truncated or oversize protocol input."""


class EncodeError(ValueError):
    """A message cannot be encoded at the requested version (bad value, null where not allowed)."""


ZERO_UUID = uuid.UUID(int=0)

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")

_unpack_i16 = I16.unpack_from
_unpack_i32 = I32.unpack_from
_pack_i16 = I16.pack
_pack_i32 = I32.pack

_ARRAY_STRUCTS: dict[str, dict[int, struct.Struct]] = {c: {} for c in "bhHiqd?"}


def array_struct(code: str, n: int) -> struct.Struct:
    """A cached Struct for `n` big-endian items of one format code (for []int32 and friends)."""
    cache = _ARRAY_STRUCTS[code]
    s = cache.get(n)
    if s is None:
        if len(cache) > 1024:
            cache.clear()
        s = cache[n] = struct.Struct(f">{n}{code}")
    return s


# --------------------------------------------------------------------------------------------
# unsigned varints (flexible versions)


def read_uvarint(b: memoryview, p: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes for 32-bit values, as Kafka's ByteUtils)."""
    v = b[p]
    if v < 0x80:
        return v, p + 1
    result = v & 0x7F
    shift = 7
    p += 1
    while True:
        v = b[p]
        p += 1
        result |= (v & 0x7F) << shift
        if v < 0x80:
            return result, p
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint is longer than 5 bytes")


def uvarint(n: int) -> bytes:
    """Encode an unsigned varint."""
    if n < 0x80:
        if n < 0:
            raise EncodeError(f"negative unsigned varint {n}")
        return _SMALL_UVARINT[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_UVARINT = [bytes([i]) for i in range(0x80)]


# --------------------------------------------------------------------------------------------
# strings


def _utf8(b: memoryview, p: int, n: int) -> str:
    e = p + n
    if e > len(b):
        raise DecodeError(f"string of {n} bytes overruns the buffer ({len(b) - p} left)")
    return str(b[p:e], "utf-8")


def read_string(b: memoryview, p: int) -> tuple[str, int]:
    (n,) = _unpack_i16(b, p)
    if n < 0:
        raise DecodeError("null string where the field is not nullable")
    p += 2
    return _utf8(b, p, n), p + n


def read_nullable_string(b: memoryview, p: int) -> tuple[str | None, int]:
    (n,) = _unpack_i16(b, p)
    p += 2
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative string length {n}")
        return None, p
    return _utf8(b, p, n), p + n


def read_compact_string(b: memoryview, p: int) -> tuple[str, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        raise DecodeError("null compact string where the field is not nullable")
    n -= 1
    return _utf8(b, p, n), p + n


def read_compact_nullable_string(b: memoryview, p: int) -> tuple[str | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    return _utf8(b, p, n), p + n


def write_string(w: Callable[[bytes], Any], s: str) -> None:
    data = s.encode()
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes is longer than int16 allows")
    w(_pack_i16(len(data)))
    w(data)


def write_nullable_string(w: Callable[[bytes], Any], s: str | None) -> None:
    if s is None:
        w(b"\xff\xff")
    else:
        write_string(w, s)


def write_compact_string(w: Callable[[bytes], Any], s: str) -> None:
    data = s.encode()
    w(uvarint(len(data) + 1))
    w(data)


def write_compact_nullable_string(w: Callable[[bytes], Any], s: str | None) -> None:
    if s is None:
        w(b"\x00")
    else:
        write_compact_string(w, s)


# --------------------------------------------------------------------------------------------
# bytes and records


def _slice(b: memoryview, p: int, n: int) -> memoryview:
    e = p + n
    if e > len(b):
        raise DecodeError(f"{n} bytes overrun the buffer ({len(b) - p} left)")
    return b[p:e]


def read_bytes(b: memoryview, p: int) -> tuple[bytes, int]:
    (n,) = _unpack_i32(b, p)
    if n < 0:
        raise DecodeError("null bytes where the field is not nullable")
    p += 4
    return bytes(_slice(b, p, n)), p + n


def read_nullable_bytes(b: memoryview, p: int) -> tuple[bytes | None, int]:
    (n,) = _unpack_i32(b, p)
    p += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative bytes length {n}")
        return None, p
    return bytes(_slice(b, p, n)), p + n


def read_compact_bytes(b: memoryview, p: int) -> tuple[bytes, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        raise DecodeError("null compact bytes where the field is not nullable")
    n -= 1
    return bytes(_slice(b, p, n)), p + n


def read_compact_nullable_bytes(b: memoryview, p: int) -> tuple[bytes | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    return bytes(_slice(b, p, n)), p + n


def read_records(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    """Record batches, nullable, int32 length: a zero-copy view of the buffer."""
    (n,) = _unpack_i32(b, p)
    p += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative records length {n}")
        return None, p
    return _slice(b, p, n), p + n


def read_compact_records(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    return _slice(b, p, n), p + n


def write_bytes(w: Callable[[bytes], Any], data: bytes | memoryview) -> None:
    w(_pack_i32(len(data)))
    w(data)


def write_nullable_bytes(w: Callable[[bytes], Any], data: bytes | memoryview | None) -> None:
    if data is None:
        w(b"\xff\xff\xff\xff")
    else:
        w(_pack_i32(len(data)))
        w(data)


def write_compact_bytes(w: Callable[[bytes], Any], data: bytes | memoryview) -> None:
    w(uvarint(len(data) + 1))
    w(data)


def write_compact_nullable_bytes(
    w: Callable[[bytes], Any], data: bytes | memoryview | None
) -> None:
    if data is None:
        w(b"\x00")
    else:
        w(uvarint(len(data) + 1))
        w(data)


# --------------------------------------------------------------------------------------------
# arrays


def read_array_len(b: memoryview, p: int) -> tuple[int, int]:
    """int32 element count; -1 is null. Counts beyond the bytes left are refused up front."""
    (n,) = _unpack_i32(b, p)
    p += 4
    if n > len(b) - p:
        raise DecodeError(f"array of {n} elements cannot fit in {len(b) - p} bytes")
    if n < -1:
        raise DecodeError(f"negative array length {n}")
    return n, p


def read_compact_array_len(b: memoryview, p: int) -> tuple[int, int]:
    """unsigned varint count + 1; 0 is null (returned as -1)."""
    n, p = read_uvarint(b, p)
    n -= 1
    if n > len(b) - p:
        raise DecodeError(f"array of {n} elements cannot fit in {len(b) - p} bytes")
    return n, p


def array_len(n: int) -> bytes:
    return _pack_i32(n)


def compact_array_len(n: int) -> bytes:
    return uvarint(n + 1)


# --------------------------------------------------------------------------------------------
# uuid


def read_uuid(b: memoryview, p: int) -> tuple[uuid.UUID, int]:
    e = p + 16
    if e > len(b):
        raise DecodeError("uuid overruns the buffer")
    raw = bytes(b[p:e])
    if raw == _ZERO16:
        return ZERO_UUID, e
    return uuid.UUID(bytes=raw), e


_ZERO16 = bytes(16)


def write_uuid(w: Callable[[bytes], Any], u: uuid.UUID) -> None:
    w(u.bytes)


# --------------------------------------------------------------------------------------------
# tagged fields


TagDecoder = Callable[[memoryview, int], tuple[Any, int]]


def read_tagged_fields(
    b: memoryview, p: int, o: Any, known: dict[int, tuple[str, TagDecoder]] | None
) -> int:
    """Read a tagged-field section into `o`: known tags set attributes, unknown ones are kept
    verbatim in `o._unknown_tagged_fields` (a list of (tag, bytes)) so re-encoding preserves them.
    Tags must be strictly increasing, as Kafka requires."""
    n, p = read_uvarint(b, p)
    if n > len(b) - p:
        raise DecodeError(f"{n} tagged fields cannot fit in {len(b) - p} bytes")
    unknown = None
    last = -1
    for _ in range(n):
        tag, p = read_uvarint(b, p)
        size, p = read_uvarint(b, p)
        if tag <= last:
            raise DecodeError(f"tagged field {tag} out of order (after {last})")
        last = tag
        end = p + size
        if end > len(b):
            raise DecodeError(f"tagged field {tag} of {size} bytes overruns the buffer")
        entry = known.get(tag) if known else None
        if entry is None:
            if unknown is None:
                unknown = []
            unknown.append((tag, bytes(b[p:end])))
        else:
            value, q = entry[1](b[:end], p)
            if q != end:
                raise DecodeError(f"tagged field {tag} declares {size} bytes but holds {q - p}")
            setattr(o, entry[0], value)
        p = end
    o._unknown_tagged_fields = unknown
    return p


TagEncoder = Callable[[Callable[[bytes], Any], Any], None]


def write_tagged_fields(
    w: Callable[[bytes], Any],
    o: Any,
    known: Sequence[tuple[int, str, Any, TagEncoder]],
) -> None:
    """Write known tagged fields whose value differs from the default (a shared instance, only
    ever compared), merged in tag order with the unknown ones preserved from decoding."""
    items: list[tuple[int, bytes]] = []
    for tag, attr, default, enc in known:
        value = getattr(o, attr)
        if value != default:
            parts: list[bytes] = []
            enc(parts.append, value)
            items.append((tag, b"".join(parts)))
    unknown = o._unknown_tagged_fields
    if unknown:
        items.extend(unknown)
        items.sort(key=lambda t: t[0])
    if not items:
        w(b"\x00")
        return
    w(uvarint(len(items)))
    for tag, data in items:
        w(uvarint(tag))
        w(uvarint(len(data)))
        w(data)


# --------------------------------------------------------------------------------------------
# message base


class Field(NamedTuple):
    """Schema of one field, emitted by the generator next to each class (for tools and tests).

    `type` is the Kafka spec type ("int32", "string", "[]int32", "[]TopicData", "Cursor"...);
    version ranges are inclusive, `None` where the field is never nullable/tagged; `default` is a
    zero-argument factory of the field's default value."""

    name: str
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None
    default: Any = None
    struct: Any = None  # the generated class for struct and struct-array fields

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def tagged_in(self, version: int) -> bool:
        return self.tagged is not None and self.tagged[0] <= version <= self.tagged[1]


_MISSING: Any = object()


class Message:
    """Base of every generated struct. Equality compares every field; repr shows them."""

    __slots__ = ()
    FIELDS: tuple[Field, ...] = ()
    _values: Callable[[Any], Any] = staticmethod(lambda o: ())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        slots = cls.__dict__.get("__slots__", ())
        if slots:
            getter = operator.attrgetter(*slots)
            cls._values = getter if len(slots) > 1 else staticmethod(lambda o, g=getter: (g(o),))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self is other or self._values(self) == self._values(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        body = ", ".join(
            f"{f}={getattr(self, f)!r}" for f in self.__slots__ if f != "_unknown_tagged_fields"
        )
        return f"{type(self).__name__}({body})"

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (nested messages become dicts, memoryviews bytes): for logs and tools."""
        return {
            f: _plain(getattr(self, f)) for f in self.__slots__ if f != "_unknown_tagged_fields"
        }


class UnsupportedVersionError(DecodeError):
    """The message has no such version (the broker answers UNSUPPORTED_VERSION)."""


class ApiMessage(Message):
    """Base of every generated top-level message (requests, responses, headers, data records).

    Subclasses carry `_DECODERS` / `_ENCODERS`: tuples of generated functions indexed by
    `version - MIN_VERSION`; versions with the same wire layout share one function."""

    __slots__ = ()
    API_KEY: int | None = None
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION: int | None = None  # first flexible version, None if never flexible
    _DECODERS: tuple[Callable[[memoryview, int], tuple[Any, int]], ...] = ()
    _ENCODERS: tuple[Callable[[Any, Callable[[bytes], Any]], None], ...] = ()

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> Any:
        """Decode one message at `version` from `buf[pos:]`; trailing bytes are ignored, as
        Kafka ignores them."""
        return cls.decode_from(buf, pos, version)[0]

    @classmethod
    def decode_from(
        cls, buf: bytes | bytearray | memoryview, pos: int, version: int
    ) -> tuple[Any, int]:
        """Decode at `pos` and return (message, position after it)."""
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.__name__} has no version {version} "
                f"(valid: {cls.MIN_VERSION}-{cls.MAX_VERSION})"
            )
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        try:
            return cls._DECODERS[version - cls.MIN_VERSION](mv, pos)
        except DecodeError:
            raise
        except DECODE_ERRORS as e:
            raise DecodeError(f"malformed {cls.__name__} v{version}: {e}") from e

    def encode(self, version: int) -> bytes:
        parts: list[bytes] = []
        self.encode_into(version, parts.append)
        return b"".join(parts)

    def encode_into(self, version: int, w: Callable[[bytes], Any]) -> None:
        """Append the encoding as chunks via `w` (e.g. `list.append`), so record batches are
        passed through as they are, with no copy, until the transport writes them."""
        cls = type(self)
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise EncodeError(f"{cls.__name__} has no version {version}")
        try:
            cls._ENCODERS[version - cls.MIN_VERSION](self, w)
        except EncodeError:
            raise
        except ENCODE_ERRORS as e:
            raise EncodeError(f"cannot encode {cls.__name__} v{version}: {e}") from e


def _plain(v: Any) -> Any:
    if isinstance(v, Message):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, DecodeError, ValueError)
ENCODE_ERRORS = (
    struct.error,
    AttributeError,
    TypeError,
    OverflowError,
    UnicodeEncodeError,
    EncodeError,
)
