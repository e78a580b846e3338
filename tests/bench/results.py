"""Raw benchmark results on disk, tied to the machine that produced them.

A results file is JSON: {"fingerprint": {...}, "date": ISO-8601, "results": {...}}. The
fingerprint is what decides the numbers: CPU model, logical core count, RAM (GiB, rounded) and
kernel release. Two runs are comparable only when the fingerprints are equal;
`load_comparable()` refuses anything else with MachineMismatch, whose message names the
differing fields, and the harness turns that into a non-zero exit before measuring anything.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any


class MachineMismatch(Exception):
    """Results from another machine (or an unreadable results file)."""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def fingerprint() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count() or 0, "ram_gib": ram_gib(),
            "kernel": platform.release()}


def describe(fp: dict[str, Any]) -> str:
    return f"{fp['cores']} x {fp['cpu']}, {fp['ram_gib']} GiB RAM, Linux {fp['kernel']}"


def save(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"fingerprint": fingerprint(), "date": dt.datetime.now().isoformat(timespec="seconds"),
           "results": results}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def load_comparable(path: Path) -> dict[str, Any]:
    """The document at `path` if it was measured on this machine; MachineMismatch otherwise."""
    try:
        doc = json.loads(Path(path).read_text())
        theirs = doc["fingerprint"]
        if "results" not in doc:
            raise KeyError("results")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise MachineMismatch(f"cannot read benchmark results {path}: {e}") from None
    ours = fingerprint()
    differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if differ:
        detail = "; ".join(f"{k}: {theirs.get(k)!r} there, {ours.get(k)!r} here" for k in differ)
        raise MachineMismatch(
            f"refusing to compare with {path}: it was measured on another machine ({detail}). "
            "Numbers from different machines are not comparable; re-run both here.")
    return doc
