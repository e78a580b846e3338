"""Transaction verification state of one partition (KIP-890 part 1): Kafka's VerificationGuard and
VerificationStateEntry (storage/internals/log).

A partition leader that receives a producer's first transactional batch for a transaction it has
not seen yet asks the transaction coordinator whether the partition is in the producer's ongoing
transaction (AddPartitionsToTxn v4+ with verify_only). Before asking it creates a
:class:`VerificationStateEntry` for the producer id, holding a fresh :class:`VerificationGuard`;
the produce carries that guard to the append, and the log appends the batch only when the
producer's entry still holds the very same guard (identity, not equality). Why an object and not
a flag: between the coordinator's "yes" and the append, the transaction may be aborted (its
marker clears the entry) and a new transaction may begin that never added this partition; with
a unique guard the stale "yes" cannot let the batch in (the ABA case Kafka's UnifiedLog comment
describes). Any transactional batch or marker appended for the producer clears its entry: from
then on the ongoing transaction (currentTxnFirstOffset) is the proof, or the transaction ended.

Who may call: the partition's log under its lock, as the producer state; no I/O.
"""

from __future__ import annotations

import itertools

__all__ = ["SENTINEL", "VerificationGuard", "VerificationStateEntry"]

_ids = itertools.count(1)


class VerificationGuard:
    """A unique token (Kafka's VerificationGuard). :data:`SENTINEL` stands for "no verification
    was started": it verifies nothing, not even itself."""

    __slots__ = ("value",)

    def __init__(self, value: int | None = None) -> None:
        self.value = next(_ids) if value is None else value

    def verify(self, other: VerificationGuard | None) -> bool:
        """True when ``other`` is this guard and neither is the sentinel."""
        return other is not None and other is not SENTINEL and self is not SENTINEL and other is self

    def __repr__(self) -> str:
        return "VerificationGuard(SENTINEL)" if self is SENTINEL else f"VerificationGuard({self.value})"


SENTINEL = VerificationGuard(0)


class VerificationStateEntry:
    """One producer's pending verification on one partition: when it started (it expires with
    producer.id.expiration.ms), its guard, and the lowest sequence and latest epoch of the
    batches that asked (Kafka keeps them for the sequence check of the first append)."""

    __slots__ = ("epoch", "lowest_sequence", "timestamp", "verification_guard")

    def __init__(self, timestamp: int, sequence: int, epoch: int) -> None:
        self.timestamp = timestamp
        self.verification_guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A newer epoch restarts the sequence; the same epoch keeps the lowest sequence."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
        elif epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence

    def __repr__(self) -> str:
        return (f"VerificationStateEntry(guard={self.verification_guard!r}, lowest_sequence={self.lowest_sequence}, "
                f"epoch={self.epoch}, timestamp={self.timestamp})")
