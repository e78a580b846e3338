"""DelayedProduce: an acks=all produce waiting until every ISR member has its records.

Kafka's rule: a partition's part is done when its high watermark reaches the end of what this
request appended (the HW only advances once every ISR replica has the data), or with an error.
On one node the HW moves with every append, so the first try completes; with followers the
operation waits in the produce purgatory, keyed by partition, woken when a follower fetch
advances the HW, and answers REQUEST_TIMED_OUT for the partitions still short at expiry, and
NOT_ENOUGH_REPLICAS_AFTER_APPEND for those replicated while the ISR was below
min.insync.replicas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.purgatory import DelayedFuture
from protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class DelayedProduce(DelayedFuture[dict[TopicPartition, Any]]):
    def __init__(
        self,
        timeout_ms: int,
        results: dict[TopicPartition, Any],
        required_offsets: dict[TopicPartition, int],
        high_watermark: Callable[[TopicPartition], int | None],
        enough_isr: Callable[[TopicPartition], bool] = lambda tp: True,
    ) -> None:
        super().__init__(timeout_ms)
        self.results = results
        self.pending = dict(required_offsets)  # tp -> offset the HW must reach
        self.high_watermark = high_watermark
        # min.insync.replicas still met? (the ISR may have shrunk after the append)
        self.enough_isr = enough_isr

    def try_complete(self) -> bool:
        for tp, required in list(self.pending.items()):
            hw = self.high_watermark(tp)
            if hw is None:  # partition gone or no longer led here
                self.results[tp].error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                del self.pending[tp]
            elif hw >= required:
                # Kafka's checkEnoughReplicasReachOffset: replicated, but if the ISR shrank below
                # min.insync.replicas meanwhile the write is not as durable as acks=all promised
                if not self.enough_isr(tp):
                    self.results[tp].error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                del self.pending[tp]
        if not self.pending:
            return self.force_complete()
        return False

    def complete_value(self) -> dict[TopicPartition, Any]:
        for tp in self.pending:  # expired before the ISR caught up
            self.results[tp].error = ErrorCode.REQUEST_TIMED_OUT
            self.results[tp].base_offset = -1
        return self.results
