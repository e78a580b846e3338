"""Walk the cluster's znodes for an operator (`odradek cluster zk-dump`): every path under the
client's root (its chroot, if any) with its data, depth first in name order, the way one would
read them with `zkCli.sh ls -R` + `get`. ZooKeeper's own /zookeeper subtree is left out.

Reads only; a znode that vanishes during the walk is skipped. `limit` bounds the walk so a
misdirected connect string (a ZooKeeper shared with other software) cannot run away."""

from __future__ import annotations

from controller.zk.client import NoNodeError, ZooKeeperClient

ZOOKEEPER_INTERNAL = "/zookeeper"


async def dump(zk: ZooKeeperClient, root: str = "/", limit: int = 100_000) -> list[tuple[str, bytes | None]]:
    """(path, data) for `root` and everything below it; data None is a znode with null data."""
    out: list[tuple[str, bytes | None]] = []
    stack = [root]
    while stack:
        path = stack.pop()
        if path == ZOOKEEPER_INTERNAL:
            continue
        if len(out) >= limit:
            raise RuntimeError(f"more than {limit} znodes under {root}: not a Kafka cluster's tree?")
        try:
            data, _ = await zk.retry_until_connected(lambda p=path: zk.get_data(p))
            children = await zk.retry_until_connected(lambda p=path: zk.get_children(p))
        except NoNodeError:
            continue
        out.append((path, data))
        base = "" if path == "/" else path
        stack.extend(f"{base}/{c}" for c in sorted(children, reverse=True))
    return out


def render(entries: list[tuple[str, bytes | None]]) -> str:
    """One line per znode: the path, then its data as text (`null` for null data)."""
    lines = []
    for path, data in entries:
        shown = "null" if data is None else data.decode("utf-8", "backslashreplace")
        lines.append(f"{path}\t{shown}")
    return "\n".join(lines)
