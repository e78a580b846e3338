"""The example configs in config/ keep their data apart (issue #21 §4): no broker's log dir, nor
ZooKeeper's dataDir, lies inside another's or inside `make run`'s ./data, where the single node
would find another broker's log dir among its partitions. And they configure a 3-broker cluster
as one: replication factor 3 (followers replicate; the old comment said they did not)."""

from __future__ import annotations

import re
from pathlib import Path

from broker.config import read_properties_file
from tests.broker_process import REPO

CONFIG = REPO / "config"


def _make_run_data() -> Path:
    m = re.search(r"^DATA\s*\?=\s*(\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert m, "Makefile sets DATA ?= <make run's log dir>"
    return (REPO / m.group(1)).resolve()


def _data_dirs() -> dict[str, Path]:
    dirs = {"make run": _make_run_data()}
    for f in sorted(CONFIG.glob("*.properties")):
        props = read_properties_file(f)
        for key in ("log.dirs", "log.dir", "dataDir"):
            for i, d in enumerate(filter(None, props.get(key, "").split(","))):
                dirs[f"{f.name} {key}[{i}]"] = (REPO / d.strip()).resolve()
    return dirs


# config/server.properties is the single node `make run` starts: the same broker, the same data
SAME_BROKER = {"make run", "server.properties log.dirs[0]"}


def test_no_example_data_dir_is_inside_another() -> None:
    dirs = _data_dirs()
    assert len([n for n in dirs if n.startswith("server-zk-")]) == 3, dirs
    nested = [(a, b) for a, da in dirs.items() for b, db in dirs.items()
              if a != b and not {a, b} <= SAME_BROKER and (da == db or da.is_relative_to(db))]
    assert nested == [], f"data dirs inside one another: {nested}"


def test_the_zookeeper_mode_examples_replicate_three_ways() -> None:
    for n in (1, 2, 3):
        text = (CONFIG / f"server-zk-{n}.properties").read_text()
        props = read_properties_file(CONFIG / f"server-zk-{n}.properties")
        assert props["broker.id"] == str(n)
        assert props["default.replication.factor"] == "3" and props["offsets.topic.replication.factor"] == "3"
        assert props["min.insync.replicas"] == "2"
        assert "do not replicate" not in text
