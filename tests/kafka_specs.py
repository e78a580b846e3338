"""Where the tests find Apache Kafka's JSON message specs, and what happens when they are absent.

The specs are not part of this repository: they live in `../shared/kafka-protocol/` beside the
clone (the layout CI provides; `ODRADEK_KAFKA_SPECS` points elsewhere). A fresh clone without
them must still run the rest of `make test`, so outside CI the modules that need the specs skip
with a reason saying where the specs go. In CI (`CI=true`) missing specs are an error: a CI run
that silently skipped the codec checks would prove nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPECS = REPO.parent / "shared" / "kafka-protocol"


def specs_dir() -> Path:
    """The spec folder: $ODRADEK_KAFKA_SPECS, else ../shared/kafka-protocol beside the repo."""
    override = os.environ.get("ODRADEK_KAFKA_SPECS")
    return Path(override) if override else DEFAULT_SPECS


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_reason(path: Path) -> str:
    return (f"Kafka's JSON message specs not found at {path}: put Apache Kafka's "
            f"clients/src/main/resources/common/message/*.json there (or set "
            f"ODRADEK_KAFKA_SPECS)")


def require_specs(*, module_level: bool = False) -> Path:
    """The spec folder if it exists; otherwise skip (outside CI) or fail (CI=true).

    With `module_level=True` it may be called while a test module is imported, so that a module
    which builds its parameters from the specs skips as a whole instead of breaking collection.
    """
    path = specs_dir()
    if path.is_dir():
        return path
    reason = missing_reason(path)
    if in_ci():
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)
    raise AssertionError("unreachable")  # pytest.skip raises
