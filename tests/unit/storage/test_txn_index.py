"""storage.txn_index: the .txnindex file of aborted transactions.

Oracles: the AbortedTxn layout (version int16, producer_id, first_offset, last_offset,
last_stable_offset, all int64) written out by hand, and Kafka's TransactionIndexTest cases.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.txn_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    CorruptIndexError,
    TransactionIndex,
    TxnIndexSearchResult,
    transaction_index_file,
)


@pytest.fixture
def path(tmp_path):
    return transaction_index_file(tmp_path, 0)


@pytest.fixture
def index(path):
    idx = TransactionIndex(0, path)
    yield idx
    idx.close()


GOLDEN_ENTRY = bytes.fromhex(
    "0000"  # version 0
    "00000000000f01c5"  # producer_id 983493
    "0000000000000089"  # first_offset 137
    "000000000000012b"  # last_offset 299
    "00000000000000c8"  # last_stable_offset 200
)


def test_file_name(tmp_path):
    assert transaction_index_file(tmp_path, 0).name == "00000000000000000000.txnindex"
    assert transaction_index_file(tmp_path, 1234, ".deleted").name == (
        "00000000000000001234.txnindex.deleted"
    )


def test_aborted_txn_serde_golden():
    txn = AbortedTxn(producer_id=983493, first_offset=137, last_offset=299, last_stable_offset=200)
    assert ABORTED_TXN_SIZE == 34
    assert txn.to_bytes() == GOLDEN_ENTRY
    assert AbortedTxn.from_bytes(GOLDEN_ENTRY) == txn


def test_unknown_version_is_corrupt():
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1"):
        AbortedTxn.from_bytes(b"\x00\x01" + GOLDEN_ENTRY[2:])


def test_index_file_golden_bytes(index, path):
    assert not path.exists()  # created by the first append, as in Kafka
    index.append(AbortedTxn(983493, 137, 299, 200))
    index.append(AbortedTxn(2**63 - 1, 300, 310, 301))
    index.flush()
    assert path.read_bytes() == GOLDEN_ENTRY + bytes.fromhex(
        "00007fffffffffffffff000000000000012c0000000000000136000000000000012d"
    )
    assert index.size_in_bytes == 68


def test_position_set_correctly_when_opened(index, path):
    txns = [
        AbortedTxn(0, 0, 10, 11),
        AbortedTxn(1, 5, 15, 13),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for t in txns:
        index.append(t)
    index.close()
    reopened = TransactionIndex(0, path)
    assert reopened.all_aborted_txns() == txns
    reopened.append(AbortedTxn(4, 51, 60, 55))
    assert reopened.all_aborted_txns() == [*txns, AbortedTxn(4, 51, 60, 55)]
    reopened.close()


def test_sanity_check(index, path):
    index.append(AbortedTxn(0, 0, 10, 11))
    index.append(AbortedTxn(1, 5, 15, 13))
    index.sanity_check()
    index.close()
    later = TransactionIndex(20, path)
    with pytest.raises(CorruptIndexError, match="is less than start offset 20"):
        later.sanity_check()
    later.close()


def test_last_offset_must_increase(index):
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(AbortedTxn(0, 0, 15, 11))


def test_last_offset_cannot_decrease(index):
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(0, 0, 10, 11))


def test_last_offset_is_checked_against_the_file_after_reopening(index, path):
    index.append(AbortedTxn(1, 5, 15, 13))
    index.close()
    reopened = TransactionIndex(0, path)
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(0, 0, 10, 11))
    reopened.close()


def test_collect_aborted_transactions(index):
    txns = [
        AbortedTxn(0, 0, 10, 11),
        AbortedTxn(1, 5, 15, 13),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for t in txns:
        index.append(t)
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult(txns, False)
    assert index.collect_aborted_txns(0, 32) == TxnIndexSearchResult(txns[:3], True)
    assert index.collect_aborted_txns(0, 35) == TxnIndexSearchResult(txns, True)
    assert index.collect_aborted_txns(10, 35) == TxnIndexSearchResult(txns, True)
    assert index.collect_aborted_txns(11, 35) == TxnIndexSearchResult(txns[1:4], True)
    assert index.collect_aborted_txns(20, 41) == TxnIndexSearchResult(txns[2:4], False)


def test_collect_after_reopen_truncate_and_reset(index, path):
    """Collecting short-cuts an index known to be empty; it must still see entries read back
    from the file, and none after they were truncated away or reset."""
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    assert not path.exists()  # an empty index never creates its file
    txns = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 12, 20, 21)]
    for t in txns:
        index.append(t)
    index.flush()
    index.close()
    reopened = TransactionIndex(0, path)
    try:
        assert reopened.collect_aborted_txns(0, 100) == TxnIndexSearchResult(txns, False)
        reopened.truncate_to(12)
        assert reopened.collect_aborted_txns(0, 100) == TxnIndexSearchResult(txns[:1], False)
        reopened.truncate_to(0)
        assert reopened.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
        reopened.append(txns[1])
        assert reopened.collect_aborted_txns(0, 100) == TxnIndexSearchResult(txns[1:], False)
        reopened.reset()
        assert reopened.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    finally:
        reopened.close()


def test_truncate(index, path):
    txns = [
        AbortedTxn(0, 0, 10, 2),
        AbortedTxn(1, 5, 15, 16),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for t in txns:
        index.append(t)
    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns
    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns[:3]
    assert path.stat().st_size == 3 * 34
    index.append(AbortedTxn(9, 40, 45, 41))  # the last offset is now 35 again
    assert index.all_aborted_txns() == [*txns[:3], AbortedTxn(9, 40, 45, 41)]
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    assert path.stat().st_size == 0
    index.append(AbortedTxn(0, 0, 1, 2))  # anything goes after a reset


def test_empty_and_missing_index(index, path):
    assert index.all_aborted_txns() == []
    assert index.collect_aborted_txns(0, 10) == TxnIndexSearchResult([], False)
    index.sanity_check()
    index.truncate_to(0)
    index.reset()
    assert not path.exists()
    assert index.size_in_bytes == 0


def test_partial_trailing_entry_is_ignored_by_reads_and_fails_the_sanity_check(index, path):
    index.append(AbortedTxn(0, 0, 10, 11))
    index.close()
    with open(path, "ab") as f:
        f.write(GOLDEN_ENTRY[:20])  # a torn write
    torn = TransactionIndex(0, path)
    assert torn.all_aborted_txns() == [AbortedTxn(0, 0, 10, 11)]
    with pytest.raises(CorruptIndexError, match="not a multiple of the entry size 34"):
        torn.sanity_check()
    torn.close()


def test_rename_delete_and_update_parent_dir(index, tmp_path):
    index.append(AbortedTxn(0, 0, 10, 11))
    new = tmp_path / "00000000000000000000.txnindex.deleted"
    index.rename_to(new)
    assert index.path == new and new.exists()
    index.append(AbortedTxn(1, 11, 12, 13))  # still writable through the open file
    assert index.all_aborted_txns()[-1] == AbortedTxn(1, 11, 12, 13)
    assert index.delete_if_exists() is True
    assert not new.exists()
    assert index.delete_if_exists() is False
    other = tmp_path / "moved"
    other.mkdir()
    index.update_parent_dir(other)
    assert index.path == other / new.name


def test_of_completed_txn():
    class Completed:
        producer_id, first_offset, last_offset, is_aborted = 7, 100, 120, True

    assert AbortedTxn.of(Completed(), 101) == AbortedTxn(7, 100, 120, 101)


txn_st = st.builds(
    AbortedTxn,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


@given(txn_st)
def test_aborted_txn_round_trip(txn):
    data = txn.to_bytes()
    assert len(data) == 34 and data[:2] == b"\x00\x00"
    assert AbortedTxn.from_bytes(data) == txn
