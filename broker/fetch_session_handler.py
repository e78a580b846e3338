"""The fetching side of a fetch session (KIP-227; Kafka's FetchSessionHandler), for replica fetchers.

Why: a follower fetches the same partitions from its leader over and over, and most of them have
nothing new most of the time. With a session the leader remembers the partitions and their fetch
positions; each incremental request names only the partitions whose position changed (or that
are new), lists the ones dropped as forgotten, and the leader answers only the partitions with
news (records, a moved high watermark or log start offset, an error). Request and response size
then follow what moves, not how many partitions a broker follows.

The protocol (Kafka's FetchMetadata): a full fetch has epoch 0 (INITIAL) and names every
partition; if the leader answers with a session id, the next requests are incremental with that
id and epochs 1, 2, ... The leader answers FETCH_SESSION_ID_NOT_FOUND (it restarted, or evicted
the session) or INVALID_FETCH_SESSION_EPOCH (a request was lost); then, and after any network
error, the next fetch is full again (with the old id and epoch 0, which closes the old session).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from broker.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class FetchPosition(NamedTuple):
    """What a fetch request says about one partition; a change is what makes it go in an
    incremental request (Kafka compares the whole PartitionData). A named tuple: one is made per
    partition and fetch, and compared with the session's, on the replication round's path."""

    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


@dataclass(slots=True)
class FetchRequestData:
    """One request's session fields and contents."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, FetchPosition]
    to_forget: list[TopicPartition] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    """One per leader connection: builds each request against the session, then learns from the
    response what the next one must be."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session: dict[TopicPartition, FetchPosition] = {}  # what the leader remembers for us

    def build(self, wanted: dict[TopicPartition, FetchPosition]) -> FetchRequestData:
        """The next request for `wanted` (every partition to fetch now, in order)."""
        if self.epoch == INITIAL_EPOCH:
            self.session = dict(wanted)
            return FetchRequestData(self.session_id, INITIAL_EPOCH, dict(wanted))
        to_send = {tp: pos for tp, pos in wanted.items() if self.session.get(tp) != pos}
        to_forget = [tp for tp in self.session if tp not in wanted]
        for tp in to_forget:
            del self.session[tp]
        self.session.update(to_send)
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget)

    def handle_response(self, error_code: int, session_id: int, partitions: set[TopicPartition]) -> bool:
        """Advance the session by a response; False: the response must not be used (its
        partitions' data is not what we asked for) and the next fetch is full."""
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        if not partitions <= self.session.keys():
            # a partition we did not ask for: the leader and we disagree on the session
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:  # no session created, or the leader closed ours
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self.epoch == INITIAL_EPOCH:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The request failed (connection lost, timeout): whether the leader saw it is unknown,
        so the next fetch is full, closing the old session (Kafka's nextCloseExistingAttemptNew)."""
        self.epoch = INITIAL_EPOCH
