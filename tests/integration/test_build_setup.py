"""What `make` itself prints and leaves behind (issue #21 §6): setuptools' deprecation warnings
on every install, Maven's escape codes in make's log, default output folders showing up as
untracked files."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from tests.broker_process import REPO


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    """The TOML-table form made setuptools print `project.license as a TOML table is deprecated`
    three times per install; the string form needs setuptools >= 77 (PEP 639)."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in meta["build-system"]["requires"]


def test_default_output_folders_are_ignored() -> None:
    for path in ("odradek-cluster/cluster.json", "clickstream-output/page_counts", "data/x-0/a.log",
                 "spark-warehouse/t", "metastore_db/db.lck", "derby.log"):
        r = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, check=False)
        assert r.returncode == 0, f"{path} is not git-ignored"


def test_maven_output_has_no_escape_codes(tmp_path: Path) -> None:
    """scripts/mvn-quiet (every mvn run of the build): offline, from ~/.m2, which `make test`'s
    install-java-deps filled. Without jansi.noreset Maven 3.8 writes ESC[0m four times here."""
    r = subprocess.run(["bash", "scripts/mvn-quiet", "-o", "-f", "tests/compat/java/kafka/pom.xml",
                        "dependency:copy-dependencies", f"-DoutputDirectory={tmp_path}"],
                       cwd=REPO, capture_output=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert b"\x1b" not in r.stdout + r.stderr, (r.stdout + r.stderr)[:500]
    assert any(p.name.startswith("kafka-clients-") for p in tmp_path.iterdir())
