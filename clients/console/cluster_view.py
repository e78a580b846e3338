"""What the console's pages show, asked of the cluster over the wire.

Every function takes a connected kafka-python KafkaAdminClient (clients.common.admin_client's
OperatorAdmin) and returns plain dicts for the templates and the JSON endpoints; nothing is
cached, so each page load is the cluster's answer at that moment. The counts follow Kafka's own
definitions: a partition is offline when it has no leader, under-replicated when its ISR is
smaller than its replica set (ReplicaManager's UnderReplicatedPartitions, seen from Metadata);
a group's lag on a partition is log end offset - committed offset (kafka-consumer-groups.sh).
Calls are blocking: the server runs them in a worker thread, one at a time per admin client.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from clients.common import error_text
from clients.groups import INACTIVE, _assignments, _committed, _offsets


def partition_counts(described: list[dict[str, Any]]) -> dict[str, int]:
    """Topics, partitions, offline (no leader) and under-replicated (ISR < replicas, with a
    leader) partitions of a Metadata answer."""
    partitions = [p for t in described for p in t["partitions"]]
    offline = sum(1 for p in partitions if p["leader_id"] < 0)
    under = sum(1 for p in partitions if p["leader_id"] >= 0 and len(p["isr_nodes"]) < len(p["replica_nodes"]))
    return {"topics": len(described), "partitions": len(partitions), "offline": offline,
            "under_replicated": under}


def _broker_versions(admin: Any, broker_ids: list[int]) -> dict[int, str]:
    """Broker id -> the version kafka-python inferred from that broker's ApiVersions answer
    (and how many APIs it advertised). kafka-python sends ApiVersions when it connects, so a
    broker this client has no connection to yet is first sent an empty DescribeLogDirs (no
    partitions: the cheapest request every broker answers); one that does not answer is left
    out."""
    conns = getattr(admin._manager, "_conns", {})
    for broker in broker_ids:
        if broker not in conns:
            try:
                admin._manager.run(admin._async_describe_log_dirs, (), [broker])
            except Exception:  # the page says "not answering" for it
                pass
    out: dict[int, str] = {}
    for node_id, conn in list(conns.items()):
        data = getattr(conn, "broker_version_data", None)
        if isinstance(node_id, int) and data is not None:
            version = ".".join(str(v) for v in data.broker_version)
            out[node_id] = f"{version} ({len(data.api_versions)} APIs)"
    return out


def overview(admin: Any) -> dict[str, Any]:
    """Cluster id, controller, brokers (host, port, rack, version) and the partition counts."""
    info = admin.describe_cluster()
    described = admin.describe_topics()
    versions = _broker_versions(admin, [b["broker_id"] for b in info["brokers"]])
    brokers = [{"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b.get("rack"),
                "fenced": bool(b.get("is_fenced")), "version": versions.get(b["broker_id"], "not answering")}
               for b in sorted(info["brokers"], key=lambda b: b["broker_id"])]
    return {"cluster_id": info.get("cluster_id"), "controller": info.get("controller_id"), "brokers": brokers,
            **partition_counts(described)}


def _sizes(admin: Any, broker_ids: list[int]) -> tuple[dict[tuple[str, int], dict[int, int]], dict[int, str]]:
    """(topic, partition) -> {broker: bytes on disk} from DescribeLogDirs, asked of each broker
    on its own so one that does not answer costs only its sizes; and broker -> why not."""
    sizes: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    failed: dict[int, str] = {}
    for broker in broker_ids:
        try:
            answer = admin.describe_log_dirs(brokers=[broker])
        except Exception as e:  # shown on the page as the broker's sizes missing
            failed[broker] = error_text(e)
            continue
        for b in answer:
            for d in b["log_dirs"]:
                for t in d.get("topics", []):
                    for p in t["partitions"]:
                        sizes[(t["name"], p["partition_index"])][b["broker"]] = p["partition_size"]
    return sizes, failed


def topics(admin: Any, names: list[str] | None = None, with_configs: bool = False) -> dict[str, Any]:
    """Each topic's partitions (leader, replicas, ISR, offline replicas, size per replica; internal
    topics last),
    its size (the largest replica of each partition, summed) and with `with_configs` all its
    configs with their source (DescribeConfigs)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    described = sorted(admin.describe_topics(names), key=lambda t: (bool(t.get("is_internal")), t["name"]))
    broker_ids = sorted(b.node_id for b in admin._manager.cluster.brokers())
    sizes, failed = _sizes(admin, broker_ids)
    out = []
    for t in described:
        parts = []
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            replica_sizes = sizes.get((t["name"], p["partition_index"]), {})
            parts.append({"partition": p["partition_index"], "leader": p["leader_id"],
                          "replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"]),
                          "offline_replicas": list(p.get("offline_replicas") or []),
                          "under_replicated": p["leader_id"] >= 0 and len(p["isr_nodes"]) < len(p["replica_nodes"]),
                          "sizes": replica_sizes, "size": max(replica_sizes.values(), default=None)})
        out.append({"name": t["name"], "internal": bool(t.get("is_internal")), "error_code": t["error_code"],
                    "partitions": parts, "size": sum(p["size"] or 0 for p in parts),
                    **{k: v for k, v in partition_counts([t]).items() if k in ("offline", "under_replicated")}})
    if with_configs and out:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t["name"]) for t in out],
                                       config_filter="all")
        for t in out:
            cfg = found.get("topic", {}).get(t["name"], {})
            t["configs"] = [{"name": k, "value": "(sensitive)" if e.get("is_sensitive") else e.get("value"),
                             "source": str(e.get("config_source"))} for k, e in sorted(cfg.items())]
    return {"topics": out, "sizes_failed": failed}


def group_lags(admin: Any, group: str) -> dict[str, Any]:
    """One consumer group: state, protocol, members with their assignment, and per partition
    committed offset, log end offset and lag; the total lag of the group and per topic."""
    from kafka import TopicPartition

    info = admin.describe_groups([group])[group]
    owned = _assignments(info)
    committed = _committed(admin, group)
    keys = sorted(set(committed) | set(owned))
    ends = _offsets(admin, (TopicPartition(t, p) for t, p in keys), "latest")
    rows = []
    per_topic: dict[str, int] = defaultdict(int)
    for key in keys:
        cur, end, m = committed.get(key), ends.get(key), owned.get(key)
        lag = None if cur is None or end is None else max(end - cur, 0)
        if lag is not None:
            per_topic[key[0]] += lag
        rows.append({"topic": key[0], "partition": key[1], "committed": cur, "end": end, "lag": lag,
                     "member": m["member_id"] if m else None, "client_id": m["client_id"] if m else None,
                     "host": m["client_host"] if m else None})
    members = [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"],
                "instance_id": m.get("group_instance_id"),
                "partitions": sorted(f"{t}-{p}" for (t, p), o in owned.items() if o is m)}
               for m in info["members"]]
    return {"group": group, "state": info["group_state"], "protocol": info.get("protocol_data") or "",
            "error": info.get("error"), "members": members, "partitions": rows,
            "lag": sum(per_topic.values()), "lag_per_topic": dict(sorted(per_topic.items())),
            "active": bool(info["members"]) or info["group_state"] not in INACTIVE}


def groups(admin: Any) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Every consumer group ListGroups reports, each as group_lags describes it; and the
    brokers whose ListGroups failed, with why. Each broker is asked on its own, as it is now in
    the cluster's metadata (not as it was when the console started: it runs for days), so one
    that does not answer costs only the groups it coordinates."""
    names: set[str] = set()
    failed: dict[int, str] = {}
    for broker in sorted(b.node_id for b in admin._manager.cluster.brokers()):
        try:
            names.update(g["group_id"] for g in admin.list_groups(broker_ids=[broker]))
        except Exception as e:  # shown on the page; the other brokers' groups still are
            failed[broker] = error_text(e)
    return [group_lags(admin, name) for name in sorted(names)], failed
