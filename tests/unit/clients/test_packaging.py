"""What a fresh clone installs and ignores: `odradek --version`; matplotlib only as the `[plot]`
extra, with a clear message when `--plot` is used without it; every third-party module the
tests import declared in pyproject.toml; the pipeline's default output folder git-ignored."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from clients.cli import main

REPO = Path(__file__).resolve().parents[3]
OURS = {"protocol", "storage", "broker", "controller", "clients", "spark_connector", "tests"}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_version_prints_the_installed_version() -> None:
    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0, r.output
    assert r.output == f"odradek, version {importlib.metadata.version('odradek')}\n"


def test_matplotlib_is_the_plot_extra_and_make_installs_it() -> None:
    project = pyproject()["project"]
    assert "matplotlib" not in {requirement_name(r) for r in project["dependencies"]}
    assert "matplotlib" in {requirement_name(r) for r in project["optional-dependencies"]["plot"]}
    makefile = (REPO / "Makefile").read_text()
    extras = re.search(r"pip install -q -e '\.\[([a-z,]+)\]'", makefile)
    assert extras and "plot" in extras.group(1).split(","), "make test/bench must install [plot]"


def test_plot_without_matplotlib_is_a_one_line_error(tmp_path: Path) -> None:
    """Before any measuring starts (no broker is needed to see it)."""
    (tmp_path / "matplotlib.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    r = subprocess.run([sys.executable, "-m", "clients.cli", "perf", "e2e", "t", "-d", "1",
                        "--plot", str(tmp_path / "e2e.png"), "-b", "127.0.0.1:1"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "Error: --plot needs matplotlib: pip install 'odradek[plot]'"], r.stderr


def imported_top_level_modules(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_third_party_module_the_tests_import_is_declared() -> None:
    project = pyproject()["project"]
    declared = {requirement_name(r) for r in project["dependencies"]}
    for reqs in project["optional-dependencies"].values():
        declared |= {requirement_name(r) for r in reqs}
    dists = importlib.metadata.packages_distributions()
    modules = imported_top_level_modules(REPO / "tests") - OURS - set(sys.stdlib_module_names)
    undeclared = {}
    for module in sorted(modules):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & declared:
            undeclared[module] = sorted(names)
    assert not undeclared, f"imported by tests but not in pyproject.toml: {undeclared}"


def test_the_pipeline_output_folder_is_git_ignored() -> None:
    r = subprocess.run(["git", "check-ignore", "-q", "clickstream-output/page_counts/x.parquet"],
                       cwd=REPO, capture_output=True, timeout=30)
    assert r.returncode == 0, "clickstream-output/ is not in .gitignore"
