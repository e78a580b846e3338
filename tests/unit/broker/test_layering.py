"""DESIGN.md §1: the broker imports the controller's interface and metadata-image types, never
a concrete controller -- handlers read the MetadataCache and ask the controller for changes.
Only broker/server.py, the composition root that builds the controller, may name one."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ALLOWED = {"controller.image", "controller.interface"}


def test_broker_modules_import_no_concrete_controller() -> None:
    wrong = []
    for path in sorted((REPO / "broker").rglob("*.py")):
        if path.name == "server.py" and path.parent.name == "broker":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] == "controller" and name not in ALLOWED:
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name}")
        if ".controller.image" in path.read_text():
            wrong.append(f"{path.relative_to(REPO)} reads the controller's image (use server.metadata_cache)")
    assert not wrong, "\n".join(wrong)
