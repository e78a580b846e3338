"""CreateAcls / DescribeAcls / DeleteAcls on a single node through Kafka 3.9.2's kafka-acls:
what it prints after --add, --list (all, one topic, a prefixed pattern) and --remove, the ACLs
kept in the metadata file across a restart, SECURITY_DISABLED without an authorizer and
CLUSTER_AUTHORIZATION_FAILED for a principal without ALTER/DESCRIBE on the cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.broker_process import BrokerProcess
from tests.security.acl_tools import AUTHORIZER, acls, block, listing, strip

T1 = "ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL)"
PRE = "ResourcePattern(resourceType=TOPIC, name=pre, patternType=PREFIXED)"
G1 = "ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)"
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
BOB_WRITE_DENY = "(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)"
REPO = Path(__file__).resolve().parents[2]


def test_kafka_acls_add_list_remove_and_restart(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=[AUTHORIZER, "super.users=User:ANONYMOUS"]).start()
    try:
        out = acls(b.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t1").stdout
        assert strip(out) == block(T1, ALICE_READ, verb="Adding ACLs for")
        acls(b.bootstrap, "--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", "pre",
             "--resource-pattern-type", "prefixed")
        acls(b.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g1")
        everything = {block(T1, ALICE_READ), block(PRE, BOB_WRITE_DENY), block(G1, ALICE_READ)}
        assert set(listing(b.bootstrap).split("\n\n")) == everything
        assert listing(b.bootstrap, "--topic", "t1") == block(T1, ALICE_READ)
        assert listing(b.bootstrap, "--topic", "pre", "--resource-pattern-type", "prefixed") == block(PRE, BOB_WRITE_DENY)
        # MATCH: what applies to topic "prefix-x": the prefixed ACL
        assert listing(b.bootstrap, "--topic", "prefix-x", "--resource-pattern-type", "match") == block(PRE, BOB_WRITE_DENY)
        b.stop()
        b.start()  # kept in the metadata file
        assert set(listing(b.bootstrap).split("\n\n")) == everything
        acls(b.bootstrap, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t1")
        assert set(listing(b.bootstrap).split("\n\n")) == everything - {block(T1, ALICE_READ)}
        acls(b.bootstrap, "--remove", "--force", "--topic", "pre", "--resource-pattern-type", "prefixed")
        assert listing(b.bootstrap) == block(G1, ALICE_READ)
        b.stop()
        b.start()  # the removals are durable too
        assert listing(b.bootstrap) == block(G1, ALICE_READ)
    finally:
        b.stop()


def test_without_authorizer_and_without_cluster_permission(tmp_path: Path) -> None:
    plain = BrokerProcess(tmp_path / "plain").start()
    try:
        p = acls(plain.bootstrap, "--list", check=False)
        assert "SecurityDisabledException: No Authorizer is configured." in p.stdout + p.stderr
    finally:
        plain.stop()
    secured = BrokerProcess(tmp_path / "secured", overrides=[AUTHORIZER]).start()
    try:  # User:ANONYMOUS has no ACL: no DESCRIBE or ALTER on the cluster
        p = acls(secured.bootstrap, "--list", check=False)
        assert "ClusterAuthorizationException" in p.stdout + p.stderr
        p = acls(secured.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--topic", "t1", check=False)
        assert "ClusterAuthorizationException" in p.stdout + p.stderr
    finally:
        secured.stop()


def odradek_acls(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clients.cli", "acls", *args, "-b", bootstrap],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def test_odradek_acls_prints_kafka_acls_layout(tmp_path: Path) -> None:
    """`odradek acls add/list/remove` change what kafka-acls lists and print what it prints."""
    b = BrokerProcess(tmp_path / "data", overrides=[AUTHORIZER, "super.users=User:ANONYMOUS"]).start()
    try:
        ours = odradek_acls(b.bootstrap, "add", "--allow-principal", "User:alice", "--operation", "Read",
                            "--topic", "t1")
        assert ours.returncode == 0, ours.stderr
        assert strip(ours.stdout) == block(T1, ALICE_READ, verb="Adding ACLs for")
        ours = odradek_acls(b.bootstrap, "add", "--deny-principal", "User:bob", "--operation", "Write",
                            "--topic", "pre", "--resource-pattern-type", "prefixed")
        assert ours.returncode == 0, ours.stderr
        theirs = listing(b.bootstrap)
        assert set(strip(odradek_acls(b.bootstrap, "list").stdout).split("\n\n")) == set(theirs.split("\n\n")) == {
            block(T1, ALICE_READ), block(PRE, BOB_WRITE_DENY)}
        match = odradek_acls(b.bootstrap, "list", "--topic", "pre-x", "--resource-pattern-type", "match")
        assert strip(match.stdout) == listing(b.bootstrap, "--topic", "pre-x", "--resource-pattern-type", "match")
        gone = odradek_acls(b.bootstrap, "remove", "--topic", "t1", "--allow-principal", "User:alice",
                            "--operation", "Read")
        assert gone.returncode == 0, gone.stderr
        assert listing(b.bootstrap) == block(PRE, BOB_WRITE_DENY)
    finally:
        b.stop()
    plain = BrokerProcess(tmp_path / "plain").start()
    try:
        refused = odradek_acls(plain.bootstrap, "list")
        assert (refused.returncode, refused.stderr) == (1, "Error: SECURITY_DISABLED: Security features are disabled.\n")
    finally:
        plain.stop()
