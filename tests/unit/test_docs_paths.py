"""Every repository path that README.md or docs/*.md names exists, so a doc cannot keep citing
a module or a config after it moved. Paths are read as written: `harness/...`, `tests/...`,
`bench/...`, `configs/...`, `tasks/...`, `scripts/...`, `docs/...`, and module paths relative
to `harness/` in backticks (`stages/generate.py`); `{a,b}` expands, `*` and `<name>` match
anything, as does a name in capitals (`bench/NAME.py`)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ROOTS = ("harness", "tests", "bench", "configs", "tasks", "scripts", "docs", "examples")
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(ROOTS)})/[\w./{{}},*<>-]*)")
# `scoring/windows.py`: a module named relative to the package, as the docs often do
MODULE = re.compile(r"`((?:\w+/)+[\w{},]+\.py)`")


def _expand(path: str) -> list[str]:
    """`a/{b,c}.py` -> a/b.py, a/c.py; `<name>` and `NAME` -> `*`."""
    path = re.sub(r"<[^>]*>|(?<=/)[A-Z]+(?=[./]|$)", "*", path)
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def _exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


def named_paths(text: str) -> set[str]:
    """The repository paths a Markdown text names, as written (trailing punctuation cut)."""
    found = {m.rstrip(".,:;)") for m in PATH.findall(text)}
    found |= {
        f"harness/{m}"
        for m in MODULE.findall(text)
        if not m.startswith(tuple(f"{r}/" for r in ROOTS))
    }
    return {p for p in found if p.rstrip("/") not in ROOTS}


def missing_paths(text: str) -> list[str]:
    return sorted(p for p in named_paths(text) if not all(_exists(e) for e in _expand(p)))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc):
    assert missing_paths(doc.read_text(encoding="utf-8")) == []


def test_a_stale_path_is_caught():
    text = (
        "`harness/scoring/offline.py` writes punkt_tab; see `stages/gone.py`, bench/nope.py and "
        "tests/{unit,elsewhere}; `harness/stages/generate.py`, tasks/*.yaml, tests/unit/."
    )
    assert missing_paths(text) == [
        "bench/nope.py",
        "harness/scoring/offline.py",
        "harness/stages/gone.py",
        "tests/{unit,elsewhere}",
    ]
