"""tests/fault/netns.py's cuts are separate: cutting broker 1 from the clients, the other brokers
or ZooKeeper stops exactly that traffic (TCP connects to listeners in the namespaces and in the
root namespace time out), and heal() restores it; the network is gone after close."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fault.netns import BROKER_PORT, NetnsCluster, available

UNAVAILABLE = available()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")

SERVE = "import socket,sys\ns=socket.create_server((sys.argv[1],int(sys.argv[2])))\nprint('up',flush=True)\n" \
        "while True: s.accept()[0].close()"


def serve(ns: str | None, host: str, port: int) -> subprocess.Popen[str]:
    cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [sys.executable, "-c", SERVE, host, str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"  # listening
    return proc


def reaches(ns: str | None, host: str, port: int) -> bool:
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout=1)"
    cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0


def test_cuts_are_separate_and_heal(tmp_path: Path):
    c = NetnsCluster(tmp_path)
    servers: list[subprocess.Popen[str]] = []
    try:
        c._create_network()
        servers += [serve(c.ns(1), c.ip(1), BROKER_PORT), serve(None, c.zk_ip, c.zookeeper.port)]

        def state() -> dict[str, bool]:
            return {"client->1": reaches(None, c.ip(1), BROKER_PORT),
                    "broker 2->1": reaches(c.ns(2), c.ip(1), BROKER_PORT),
                    "1->zookeeper": reaches(c.ns(1), c.zk_ip, c.zookeeper.port),
                    "2->zookeeper": reaches(c.ns(2), c.zk_ip, c.zookeeper.port)}

        everything = {"client->1": True, "broker 2->1": True, "1->zookeeper": True, "2->zookeeper": True}
        assert state() == everything
        c.cut(1, clients=True)
        assert state() == {**everything, "client->1": False}
        c.heal(1)
        c.cut(1, peers=True)
        assert state() == {**everything, "broker 2->1": False}
        c.heal(1)
        c.cut(1, zookeeper=True)
        assert state() == {**everything, "1->zookeeper": False}
        c.heal()
        assert state() == everything
    finally:
        for s in servers:
            s.kill()
            s.wait()
            if s.stdout is not None:
                s.stdout.close()
        c._remove_network()
    links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    assert c.bridge not in links
    assert c.ns(1) not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
