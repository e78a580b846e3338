"""OffsetMap: key -> offset of the key's latest record in the dirty section of a log (Kafka's
``OffsetMap`` / ``SkimpyOffsetMap``).

Kafka's map stores a 16-byte MD5 digest and an 8-byte offset per key in a fixed buffer of
``log.cleaner.dedupe.buffer.size`` bytes (split between the cleaner threads) and stops taking
keys at ``log.cleaner.io.buffer.load.factor`` of its slots; a cleaning then covers only the part
of the dirty section whose keys fit, and the next cleaning goes on from there. This one is a
dict: keys of at most 16 bytes are stored as they are (no digest to compute, no collision at
all), longer ones as their MD5 digest, as Kafka's. A dict entry of that shape costs about
:data:`BYTES_PER_ENTRY` bytes of memory, so the number of slots is the buffer size divided by
that -- the configured buffer bounds the memory actually used, as it does in Kafka.

Who may call: the cleaner, in its worker process; not thread-safe.
"""

from __future__ import annotations

import hashlib

__all__ = ["BYTES_PER_ENTRY", "OffsetMap"]

# measured: sys.getsizeof of a 16-byte bytes key (49) and a large int (32), plus the dict's
# index and entry (8 + 24 bytes) at its usual two-thirds load: ~120
BYTES_PER_ENTRY = 120
_DIGEST_OVER = 16


class OffsetMap:
    """Key -> latest offset, with a fixed number of slots; see the module docstring."""

    __slots__ = ("_map", "latest_offset", "slots")

    def __init__(self, memory: int) -> None:
        if memory < BYTES_PER_ENTRY:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, not {memory}")
        self.slots = memory // BYTES_PER_ENTRY
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset put in the map (Kafka's latestOffset)

    @staticmethod
    def digest(key: bytes) -> bytes:
        return key if len(key) <= _DIGEST_OVER else hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[key if len(key) <= _DIGEST_OVER else hashlib.md5(key, usedforsecurity=False).digest()] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when it is not in the map."""
        return self._map.get(
            key if len(key) <= _DIGEST_OVER else hashlib.md5(key, usedforsecurity=False).digest(), -1
        )

    def update_latest_offset(self, offset: int) -> None:
        """Record that the map covers everything up to ``offset`` (the last offset of a batch
        with no key to add, e.g. a control or an aborted batch)."""
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def __len__(self) -> int:
        return len(self._map)
