"""Build a synthetic run folder of the quickstart's shape for the report's height test (no
model, ~2 s): tests/data/report_run/make_run.py's run, scaled to what configs/quickstart.yaml
asks for (four items, four policies, replies of 256 tokens scored in 64-token windows,
forks of `none` and `restate` at four positions with 2 records each, so every fork says
"cannot tell"), and its verdicts as the quickstart read them (the French and lowercase items
fail from the first window under every policy but restate; the exclamation rule is kept at
first and dropped later). Every file of the real run is there except the conversation's
(turns.csv and its tables: see the chat run, tests/data/chat_run/make_run.py).

    python tests/data/report_run/make_quickstart_run.py OUT_DIR
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ITEMS = ("cheer-exclaim", "fr-tale", "lowercase-tale", "conv-exclaim")
POLICIES = ("none", "restate", "periodic-96-user", "adaptive-64-user")
ONSETS = {
    "cheer-exclaim": [1, 2, 1, None],
    "fr-tale": [0, 0, 0, 0],
    "lowercase-tale": [0, 0, 1, 0],
    "conv-exclaim": [None, 3, 2, 1],
}
KEPT = {"restate": [None, None, None, 3]}  # restate keeps every item but one sample
# n = 2 records at every fork: no dependence interval decides (the quickstart's "cannot tell")
UNDECIDED = ([0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 0.0, 0.0], [(-0.7, 1.0)] * 4)


def _base():
    path = Path(__file__).with_name("make_run.py")
    spec = importlib.util.spec_from_file_location("report_make_run_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_run(out: Path) -> Path:
    base = _base()
    base.ITEMS, base.POLICIES = ITEMS, POLICIES
    base.GENERATED, base.WINDOW = 256, 64
    base.FORK_AT = (0, 32, 64, 128)
    base.GOOD = {item: ["la", "mer", "est", "calme", "ce", "soir"] for item in ITEMS}
    base.ONSETS = {
        (item, policy): KEPT.get(policy, onsets) for item, onsets in ONSETS.items()
        for policy in POLICIES
    }  # fmt: skip
    base.CARRIED = {(item, p): UNDECIDED for item in ITEMS for p in ("none", "restate")}
    return base.build_run(Path(out))


if __name__ == "__main__":
    print(build_run(Path(sys.argv[1])))
