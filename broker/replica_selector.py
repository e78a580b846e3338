"""Which replica a consumer should fetch from (KIP-392, Kafka's ReplicaSelector): pure logic, no I/O.

A leader answers a consumer's fetch (v11+, which carries the client's rack) with a preferred
read replica instead of records when `replica.selector.class` names a selector and that selector
picks a follower; the consumer then fetches from that follower until it errs or its metadata
ages out. Unset (Kafka's default, null): no selector, consumers read from the leader.

The one selector built in is Kafka's RackAwareReplicaSelector: a replica in the client's rack
(`client.rack` = `broker.rack`), the leader if it is one of them, else the most caught-up of them
(highest log end offset, then the shortest time since it was last caught up, then the highest
broker id: ReplicaView.comparator); the leader when the client has no rack or no replica shares
it. Odradek cannot load Java classes, so no other class name is accepted (broker.config).

What the leader offers the selector (Kafka's ReplicaManager.findPreferredReadReplica): itself,
and the followers in the committed ISR that hold the fetch offset (log start <= offset <= log
end), each with the endpoint of the listener the client connected to (a broker with none, or not
alive, has no endpoint: never a rack match, never sent). A follower out of the ISR is never
offered: it may lag, and the consumer would fall behind with it for as long as it lags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (RACK_AWARE_REPLICA_SELECTOR,)
NO_NODE = -1  # Kafka's Node.noNode(): a replica without an endpoint on the client's listener
NO_PREFERRED_REPLICA = -1  # FetchResponse.INVALID_PREFERRED_REPLICA_ID: read from the leader


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """The consumer a fetch comes from (Kafka's DefaultClientMetadata, without the principal:
    there is no authentication yet)."""

    rack_id: str
    client_id: str
    client_address: str
    listener_name: str


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as a selector sees it (Kafka's DefaultReplicaView); equal views are the same
    replica, as Kafka compares the leader's view with the selected one."""

    node_id: int  # NO_NODE without an endpoint
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class PartitionView:
    replicas: Sequence[ReplicaView]  # the leader's view included
    leader: ReplicaView


def most_caught_up(view: ReplicaView) -> tuple[int, int, int]:
    """Kafka's ReplicaView.comparator as a sort key: the max is the most caught-up replica."""
    return view.log_end_offset, -view.time_since_last_caught_up_ms, view.node_id


class ReplicaSelector(Protocol):
    def select(self, topic_partition: tuple[str, int], client: ClientMetadata,
               partition: PartitionView) -> ReplicaView | None: ...


class RackAwareReplicaSelector:
    """Kafka's org.apache.kafka.common.replica.RackAwareReplicaSelector (see the module docstring)."""

    def select(self, topic_partition: tuple[str, int], client: ClientMetadata,
               partition: PartitionView) -> ReplicaView | None:
        if not client.rack_id:
            return partition.leader
        same_rack = [r for r in partition.replicas if r.rack == client.rack_id]
        if not same_rack or partition.leader in same_rack:
            return partition.leader
        return max(same_rack, key=most_caught_up)


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector `replica.selector.class` names; None when unset (leader only). The config
    refuses any other name before this is called."""
    if class_name is None:
        return None
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector()
    raise ValueError(f"unknown replica selector {class_name!r}: only {', '.join(SELECTORS)}")


def preferred_read_replica(selector: ReplicaSelector, topic_partition: tuple[str, int], client: ClientMetadata,
                           leader_id: int, leader_log_end_offset: int,
                           candidates: Iterable[tuple[int, int, int]],
                           racks: Mapping[int, str | None]) -> int | None:
    """The follower a consumer should fetch from, or None for the leader (Kafka's
    findPreferredReadReplica once the candidates are chosen). `candidates`: (broker id, log end
    offset, ms since last caught up) of the followers the leader offers (the module docstring);
    `racks`: broker id -> rack of the brokers with an endpoint on the client's listener."""

    def view(broker_id: int, log_end_offset: int, since_ms: int) -> ReplicaView:
        if broker_id in racks:
            return ReplicaView(broker_id, racks[broker_id], log_end_offset, since_ms)
        return ReplicaView(NO_NODE, None, log_end_offset, since_ms)

    leader = view(leader_id, leader_log_end_offset, 0)
    replicas = [view(*c) for c in candidates]
    replicas.append(leader)
    selected = selector.select(topic_partition, client, PartitionView(replicas, leader))
    # the selector may name the leader; a response never does (the consumer is already there)
    if selected is None or selected.node_id == NO_NODE or selected == leader:
        return None
    return selected.node_id
