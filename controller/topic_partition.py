"""The controller's keys: `TopicPartition` and `PartitionAndReplica`, printed as Kafka prints them.

Why a module of its own: the state machines, the leader elections and the ZooKeeper controller
all key their state by these two, and the state-change log lines an operator greps for embed
their string forms ("orders-3", "[Topic=orders,Partition=3,Replica=1]"), so both must print
exactly as Kafka's `org.apache.kafka.common.TopicPartition.toString` and the case class
`PartitionAndReplica` in core/src/main/scala/kafka/controller/KafkaController.scala do.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic (Kafka's `TopicPartition`); `str()` is Kafka's "topic-partition"."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionAndReplica(NamedTuple):
    """One replica of one partition: the key of the replica state machine."""

    topic_partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition

    def __str__(self) -> str:
        return f"[Topic={self.topic},Partition={self.partition},Replica={self.replica}]"
