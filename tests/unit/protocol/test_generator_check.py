"""`python -m protocol.generator --check` must fail, naming the file, whenever the output folder
differs from a fresh generation: a hand-edited module, a missing one, or a stale extra one. The
checks run against a temporary copy of `protocol/messages/` (via `--out`), never the real tree;
a plain run then repairs the copy, after which `--check` passes again."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kafka_specs import require_specs

REPO = Path(__file__).resolve().parents[3]
MESSAGES = REPO / "protocol" / "messages"
COORDINATOR = REPO / "protocol" / "coordinator"


def run_generator(*args: str) -> subprocess.CompletedProcess[str]:
    specs = require_specs()
    return subprocess.run(
        [sys.executable, "-m", "protocol.generator", "--specs", str(specs), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A fresh copy of the committed generated package."""
    dst = tmp_path / "messages"
    shutil.copytree(MESSAGES, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_check_passes_on_an_unaltered_copy(out: Path) -> None:
    proc = run_generator("--check", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def altered(out: Path) -> str:
    path = out / "metadata_response.py"
    path.write_text(path.read_text() + "\n# hand edit\n")
    return path.name


def missing(out: Path) -> str:
    (out / "fetch_request.py").unlink()
    return "fetch_request.py"


def extra(out: Path) -> str:
    (out / "removed_api_request.py").write_text("# left over from a spec that is gone\n")
    return "removed_api_request.py"


def altered_init(out: Path) -> str:
    path = out / "__init__.py"
    path.write_text(path.read_text().replace("    0: ProduceRequest,\n", ""))
    return "__init__.py"


@pytest.mark.parametrize("damage", [altered, missing, extra, altered_init])
def test_check_fails_and_names_the_stale_file(out: Path, damage: Callable[[Path], str]) -> None:
    name = damage(out)
    before = snapshot(out)

    proc = run_generator("--check", "--out", str(out))

    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "stale (1 files)" in proc.stderr
    assert name in proc.stderr
    assert "up to date" not in proc.stdout
    assert snapshot(out) == before, "--check must not write"


def test_check_lists_every_stale_file(out: Path) -> None:
    names = {altered(out), missing(out), extra(out)}
    proc = run_generator("--check", "--out", str(out))
    assert proc.returncode == 1
    assert "stale (3 files)" in proc.stderr
    for name in names:
        assert name in proc.stderr


def test_plain_run_repairs_the_folder(out: Path) -> None:
    altered(out)
    missing(out)
    extra(out)

    proc = run_generator("--out", str(out))

    assert proc.returncode == 0, proc.stderr
    assert "wrote 3 of" in proc.stdout
    assert snapshot(out) == snapshot(MESSAGES)  # identical to the committed package
    assert run_generator("--check", "--out", str(out)).returncode == 0


def test_check_of_an_empty_folder_fails(tmp_path: Path) -> None:
    proc = run_generator("--check", "--out", str(tmp_path / "nowhere"))
    assert proc.returncode == 1
    assert "__init__.py" in proc.stderr


def test_missing_spec_folder_is_an_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "protocol.generator", "--check", "--specs", str(tmp_path / "x")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "spec folder not found" in proc.stderr


@pytest.fixture
def coordinator_out(tmp_path: Path) -> Path:
    """A fresh copy of the committed coordinator record package."""
    dst = tmp_path / "coordinator"
    shutil.copytree(COORDINATOR, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_check_covers_the_coordinator_records(out: Path, coordinator_out: Path) -> None:
    """`make lint` runs `--check` with the default folders: a hand edit of a generated
    coordinator record module fails it just as one of a message does, and a plain run repairs
    it to the committed package."""
    args = ("--out", str(out), "--coordinator-out", str(coordinator_out))
    ok = run_generator("--check", *args)
    assert ok.returncode == 0, ok.stderr
    assert "protocol/coordinator is up to date (7 files)" in ok.stdout

    path = coordinator_out / "transaction_log_value.py"
    path.write_text(path.read_text().replace("_S_qhib.pack(", "_S_qhib.pack(0 and "))
    (coordinator_out / "offset_commit_key.py").unlink()
    proc = run_generator("--check", *args)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "protocol/coordinator is stale (2 files)" in proc.stderr
    assert "offset_commit_key.py" in proc.stderr and "transaction_log_value.py" in proc.stderr
    assert "protocol/messages is stale" not in proc.stderr

    assert run_generator(*args).returncode == 0
    assert snapshot(coordinator_out) == snapshot(COORDINATOR)


def test_missing_coordinator_spec_folder_is_an_error(tmp_path: Path) -> None:
    proc = run_generator("--check", "--coordinator-specs", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert f"spec folder not found: {tmp_path / 'x'}" in proc.stderr
