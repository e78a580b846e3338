"""kafka-acls (kafka.admin.AclCommand of Kafka 3.9.2) as the security tests run it."""

from __future__ import annotations

import subprocess
import time

from tests.compat.jvm import run_tool

ACLS = "kafka.admin.AclCommand"
AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"


def acls(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """kafka-acls --bootstrap-server `bootstrap` with `args` (bounded; `check`: exit 0)."""
    return run_tool(ACLS, "--bootstrap-server", bootstrap, *args, check=check)


def listing(bootstrap: str, *args: str) -> str:
    """What `kafka-acls --list` prints, trailing blanks of each line removed."""
    return "\n".join(line.rstrip() for line in acls(bootstrap, "--list", *args).stdout.splitlines()).strip()


def until_listing(bootstrap: str, expected: str, timeout: float = 30.0) -> str:
    """Poll `--list` until it prints `expected` (another broker's change reaching this one)."""
    deadline = time.monotonic() + timeout
    seen = listing(bootstrap)
    while seen != expected.strip() and time.monotonic() < deadline:
        time.sleep(0.3)
        seen = listing(bootstrap)
    return seen


def block(pattern: str, *entries: str, verb: str = "Current ACLs for") -> str:
    """kafka-acls' layout of one resource: the header line and one tab-indented line per entry."""
    return f"{verb} resource `{pattern}`:\n" + "\n".join(f" \t{e}" for e in entries)


def strip(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()
