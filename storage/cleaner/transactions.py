"""CleanedTransactionMetadata: what the cleaner must know about transactions while it walks a
log in offset order (Kafka's ``CleanedTransactionMetadata``).

* Batches of an aborted transaction (known from the ``.txnindex`` entries of the range, Kafka's
  ``collectAbortedTransactions``) are discarded: they never count as a key's latest value.
* An ABORT marker is kept while batches of its transaction were seen in this cleaning (and the
  aborted transaction is then written to the cleaned segment's transaction index); once none
  are left, it can go -- after its delete horizon, like a tombstone.
* A COMMIT marker can go once no batch of its transaction is left before it.

Odradek has no transactional producers yet; logs written by Kafka can hold transactions, and
this keeps the cleaner right for them and ready for the transactions work.

Who may call: the cleaner, for one log at a time; not thread-safe.
"""

from __future__ import annotations

import heapq

from protocol.records import CONTROL_ABORT, CONTROL_COMMIT, TRANSACTIONAL_MASK, BatchHeader
from storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTransactionMetadata"]


class _AbortedTransactionMetadata:
    __slots__ = ("aborted_txn", "last_observed_batch_offset")

    def __init__(self, aborted_txn: AbortedTxn) -> None:
        self.aborted_txn = aborted_txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """See the module docstring."""

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTransactionMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            t = heapq.heappop(self._aborted)[2]
            self._ongoing_aborted.setdefault(t.producer_id, _AbortedTransactionMetadata(t))

    def on_control_batch_read(self, h: BatchHeader, control: int | None) -> bool:
        """A control batch with marker type ``control`` (None: an empty, already cleaned
        one) was reached; whether it can be discarded."""
        self._consume_aborted_up_to(h.base_offset + h.last_offset_delta)
        if control is None:
            return True
        pid = h.producer_id
        if control == CONTROL_ABORT:
            meta = self._ongoing_aborted.pop(pid, None)
            if meta is not None and meta.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta.aborted_txn)
                return False
            return True
        if control == CONTROL_COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """A data batch was reached; whether it belongs to an aborted transaction (and so can
        be discarded)."""
        last = h.base_offset + h.last_offset_delta
        self._consume_aborted_up_to(last)
        if not h.attributes & TRANSACTIONAL_MASK:
            return False
        meta = self._ongoing_aborted.get(h.producer_id)
        if meta is not None:
            meta.last_observed_batch_offset = last
            return True
        self._ongoing_committed.add(h.producer_id)
        return False
