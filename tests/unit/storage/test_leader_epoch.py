"""storage.leader_epoch: LeaderEpochFileCache.

The cases mirror Kafka's LeaderEpochFileCacheTest (storage/src/test/java/org/apache/kafka/
storage/internals/epoch); names keep Kafka's so the two can be compared. Kafka's
truncateFromStartAsyncFlush / truncateFromEndAsyncFlush are truncate_from_start / _end here.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoints import CheckpointFormatError, EpochEntry, LeaderEpochCheckpointFile
from storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def checkpoint(tmp_path):
    return LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")


@pytest.fixture
def cache(checkpoint):
    return LeaderEpochFileCache(checkpoint, topic_partition="TestTopic-5")


def E(epoch, offset):
    return EpochEntry(epoch, offset)


def test_undefined_constants():
    assert UNDEFINED == (-1, -1)


def test_previous_epoch(cache):
    assert cache.previous_epoch() is None
    cache.assign(2, 10)
    assert cache.previous_epoch() is None
    cache.assign(4, 15)
    assert cache.previous_epoch() == 2
    cache.assign(10, 20)
    assert cache.previous_epoch() == 4
    cache.truncate_from_end(18)
    assert cache.previous_epoch() == 2


def test_should_add_epoch_and_message_offset_to_cache(cache):
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.epoch_entries()[0] == E(2, 10)
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_should_return_log_end_offset_if_latest_epoch_requested(cache):
    cache.assign(2, 11)
    cache.assign(2, 12)
    assert cache.end_offset_for(2, 14) == (2, 14)


def test_should_return_undefined_offset_if_undefined_epoch_requested(cache):
    cache.assign(2, 11)
    cache.assign(3, 12)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_should_not_overwrite_log_end_offset_for_a_leader_epoch_once_it_has_been_assigned(cache):
    cache.assign(2, 9)
    cache.assign(2, 10)
    assert cache.epoch_entries() == [E(2, 9)]


def test_should_enforce_monotonically_increasing_start_offsets(cache):
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.epoch_entries() == [E(3, 9)]


def test_should_not_overwrite_offset_for_a_leader_epoch_once_it_has_been_assigned(cache):
    cache.assign(2, 6)
    cache.assign(2, 10)
    assert cache.epoch_entries()[0].start_offset == 6


def test_should_return_unsupported_if_no_epoch_recorded(cache):
    assert cache.end_offset_for(0, 0) == UNDEFINED


def test_should_return_unsupported_if_no_epoch_recorded_and_undefined_epoch_requested(cache):
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_should_return_first_epoch_if_requested_epoch_less_than_first_epoch(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_should_truncate_if_matching_epoch_but_earlier_starting_offset(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    cache.assign(7, 12)
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_should_get_first_offset_of_subsequent_epoch_when_offset_requested_for_previous_epoch(
    cache,
):
    for epoch, offset in [(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)]:
        cache.assign(epoch, offset)
    assert cache.end_offset_for(2, 17) == (2, 15)


def test_should_return_next_available_epoch_if_there_is_no_exact_epoch_for_the_one_requested(cache):
    cache.assign(0, 10)
    cache.assign(2, 13)
    cache.assign(4, 17)
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)


def test_should_not_update_epoch_and_start_offset_if_it_did_not_change(cache):
    assert cache.assign(2, 6) is True
    assert cache.assign(2, 7) is False
    assert cache.epoch_entries() == [E(2, 6)]


def test_should_return_invalid_offset_if_epoch_is_requested_which_is_not_currently_tracked(cache):
    cache.assign(2, 100)
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_should_support_epochs_that_do_not_start_from_zero(cache):
    cache.assign(2, 6)
    assert cache.end_offset_for(2, 7) == (2, 7)
    assert cache.epoch_entries() == [E(2, 6)]


def test_should_persist_epochs_between_instances(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    cache.assign(2, 6)
    cache2 = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
    assert cache2.epoch_entries() == [E(2, 6)]


def test_should_enforce_monotonically_increasing_epochs(cache):
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert cache.epoch_entries()[0] == E(1, 7)


def test_should_enforce_offsets_increase_monotonically(cache):
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert cache.epoch_entries()[0] == E(3, 5)


def test_should_increase_and_track_epochs_as_leaders_change_many_times(cache):
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    assert cache.end_offset_for(0, 5) == (0, 0)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_should_increase_and_track_epochs_as_follower_receives_many_messages(cache):
    for offset in (0, 1, 2):
        cache.assign(0, offset)
    assert cache.latest_epoch == 0
    assert cache.end_offset_for(0, 3) == (0, 3)
    for offset in (3, 4, 5):
        cache.assign(1, offset)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 6) == (1, 6)
    for offset in (6, 7, 8):
        cache.assign(2, offset)
    assert cache.latest_epoch == 2
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


@pytest.fixture
def three(cache):
    cache.assign(2, 6)
    cache.assign(3, 8)
    cache.assign(4, 11)
    return cache


def test_should_drop_entries_on_epoch_boundary_when_removing_latest_entries(three):
    assert three.truncate_from_end(8) == [E(3, 8), E(4, 11)]
    assert three.epoch_entries() == [E(2, 6)]


def test_should_preserve_reset_offset_on_clear_earliest_if_one_exists(three):
    three.truncate_from_start(8)
    assert three.epoch_entries() == [E(3, 8), E(4, 11)]


def test_should_not_clear_anything_if_offset_too_early(three):
    assert three.truncate_from_start(1) == []
    assert three.epoch_entries() == [E(2, 6), E(3, 8), E(4, 11)]


def test_should_not_clear_anything_if_offset_is_first_offset(three):
    three.truncate_from_start(6)
    assert three.epoch_entries() == [E(2, 6), E(3, 8), E(4, 11)]


def test_should_retain_latest_epoch_on_clear_all_earliest(three):
    three.truncate_from_start(11)
    assert three.epoch_entries() == [E(4, 11)]


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest(three):
    three.truncate_from_start(9)
    assert three.epoch_entries() == [E(3, 9), E(4, 11)]


def test_should_update_offset_between_first_two_epoch_boundaries_on_clear_earliest(cache):
    cache.assign(0, 0)
    cache.assign(1, 7)
    cache.assign(2, 10)
    cache.truncate_from_start(5)
    assert cache.epoch_entries() == [E(0, 5), E(1, 7), E(2, 10)]


def test_should_retain_latest_epoch_on_clear_all_earliest_and_update_its_offset(three):
    three.truncate_from_start(15)
    assert three.epoch_entries() == [E(4, 15)]


def test_should_drop_entries_between_epoch_boundary_when_removing_newest(three):
    three.truncate_from_end(9)
    assert three.latest_epoch == 3
    assert three.epoch_entries() == [E(2, 6), E(3, 8)]


def test_should_clear_all_entries(three, checkpoint):
    three.clear_and_flush()
    assert three.epoch_entries() == []
    assert checkpoint.path.read_bytes() == b"0\n0\n"


def test_should_not_reset_epoch_history_head_if_undefined_passed(three):
    three.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    assert len(three.epoch_entries()) == 3


def test_should_not_reset_epoch_history_tail_if_undefined_passed(three):
    three.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert len(three.epoch_entries()) == 3


def test_should_fetch_latest_epoch_of_empty_cache(cache):
    assert cache.latest_epoch is None
    assert cache.latest_entry is None
    assert cache.earliest_entry is None
    assert not cache.non_empty


def test_should_fetch_end_offset_of_empty_cache(cache):
    assert cache.end_offset_for(7, 0) == UNDEFINED


def test_should_clear_earliest_and_latest_on_empty_cache(cache):
    assert cache.truncate_from_start(7) == []
    assert cache.truncate_from_end(7) == []


def test_find_previous_epoch(cache):
    assert cache.previous_epoch(2) is None
    cache.assign(2, 10)
    assert cache.previous_epoch(2) is None
    cache.assign(4, 15)
    assert cache.previous_epoch(4) == 2
    cache.assign(10, 20)
    assert cache.previous_epoch(10) == 4
    cache.truncate_from_end(18)
    assert cache.previous_epoch(cache.latest_epoch) == 2


def test_find_previous_entry(cache):
    assert cache.previous_entry(2) is None
    cache.assign(2, 10)
    assert cache.previous_entry(2) is None
    cache.assign(4, 15)
    assert cache.previous_entry(4) == E(2, 10)
    cache.assign(10, 20)
    assert cache.previous_entry(10) == E(4, 15)
    cache.truncate_from_end(18)
    assert cache.previous_entry(cache.latest_epoch) == E(2, 10)


def test_find_next_epoch(cache):
    cache.assign(0, 0)
    cache.assign(1, 100)
    cache.assign(2, 200)
    assert cache.next_epoch(-1) == 0
    assert cache.next_epoch(0) == 1
    assert cache.next_epoch(1) == 2
    assert cache.next_epoch(2) is None
    assert cache.next_epoch(100) is None


def test_get_epoch_entry(cache):
    cache.assign(2, 100)
    cache.assign(3, 500)
    cache.assign(5, 1000)
    assert cache.epoch_entry(2) == E(2, 100)
    assert cache.epoch_entry(3) == E(3, 500)
    assert cache.epoch_entry(5) == E(5, 1000)
    assert cache.epoch_entry(4) is None


def test_should_fetch_epoch_for_given_offset(cache):
    cache.assign(0, 10)
    cache.assign(1, 20)
    cache.assign(5, 30)
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(5) is None


def test_should_write_checkpoint_on_truncation(three, checkpoint):
    three.truncate_from_end(11)
    three.truncate_from_start(8)
    assert checkpoint.read() == [E(3, 8)]
    assert checkpoint.path.read_bytes() == b"0\n1\n3 8\n"


def test_epoch_entries_in_range_does_not_change_the_cache(three):
    assert three.epoch_entries_in_range(7, 11) == [E(2, 7), E(3, 8)]
    assert three.epoch_entries_in_range(-1, 100) == [E(2, 6), E(3, 8), E(4, 11)]
    assert three.epoch_entries() == [E(2, 6), E(3, 8), E(4, 11)]


# ---------------------------------------------------------------------------------------------
# persistence and validation


def test_every_change_is_written_to_the_checkpoint(cache, checkpoint):
    assert checkpoint.path.read_bytes() == b""  # created empty, not written on load
    cache.assign(0, 0)
    assert checkpoint.path.read_bytes() == b"0\n1\n0 0\n"
    cache.assign(0, 5)  # no change, no write needed
    cache.assign(3, 100)
    assert checkpoint.path.read_bytes() == b"0\n2\n0 0\n3 100\n"
    cache.assign_all([E(4, 150), E(5, 180)])
    assert checkpoint.path.read_bytes() == b"0\n4\n0 0\n3 100\n4 150\n5 180\n"
    cache.truncate_from_end(150)
    assert checkpoint.path.read_bytes() == b"0\n2\n0 0\n3 100\n"


def test_for_partition_dir(tmp_path):
    cache = LeaderEpochFileCache.for_partition_dir(tmp_path)
    cache.assign(1, 0)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n1 0\n"


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_invalid_entries_are_rejected(cache, epoch, offset):
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        cache.assign(epoch, offset)


def test_loading_a_non_monotonic_checkpoint_keeps_only_a_monotonic_history(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n1 10\n2 5\n3 20\n")
    cache = LeaderEpochFileCache(path)
    assert cache.epoch_entries() == [E(2, 5), E(3, 20)]
    assert path.read_bytes() == b"0\n3\n1 10\n2 5\n3 20\n"  # loading does not write


def test_loading_a_malformed_checkpoint_asks_for_a_rebuild(tmp_path, caplog):
    # issue #12: the log loader rebuilds the entries from the batch headers (test_log_load_integrity)
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n1\nnope\n")
    cache = LeaderEpochFileCache(path)
    assert cache.needs_rebuild and cache.epoch_entries() == []
    assert "Malformed line" in caplog.text
    assert path.read_bytes() == b"0\n1\nnope\n"  # loading does not write
    with pytest.raises(CheckpointFormatError, match="Malformed line"):
        LeaderEpochCheckpointFile(path).read()
    assert not LeaderEpochFileCache(tmp_path / "other").needs_rebuild


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=30))
def test_entries_stay_strictly_monotonic(tmp_path_factory, assignments):
    path = tmp_path_factory.mktemp("lec") / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path), sync=False)
    for epoch, offset in assignments:
        cache.assign(epoch, offset)
        entries = cache.epoch_entries()
        assert all(
            a.epoch < b.epoch and a.start_offset < b.start_offset
            for a, b in itertools.pairwise(entries)
        )
        assert cache.latest_entry is not None
        assert LeaderEpochFileCache(LeaderEpochCheckpointFile(path)).epoch_entries() == entries
