"""The run's checks measured on labelled text: confusion counts per check id, the input of the
corrected estimates (harness.scoring.corrected; docs/architecture.md, "Estimators: corrected").

A run's check is measured by the labelled rows whose check spec is the same spec (every field
equal: `language:fr` with the default settings matches `{"type": "language", "target": "fr"}`),
scored through the run's scoring path with the run's candidate languages
(`harness.scoring.validation.score_labelled`). The rows: the shipped sets' frozen halves (a
`-dev` set is the half rules were tuned on, so its error rate is optimistic and not used), and
the user's own file named by `scoring.validation`. Judge checks are left out here: a judge is
measured against the code checks on the run's own windows (calibration.csv).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from harness.checks import Check
from harness.scoring.corrected import CheckRates
from harness.scoring.validation import LabelledReply, read_labelled, score_labelled, shipped_sets

TUNED_SUFFIX = "-dev"  # a shipped set's half that rules were tuned on


def labelled_sets(user_file: Path | None) -> list[tuple[str, list[LabelledReply]]]:
    """(source, rows) of the frozen shipped sets and the user's file (read with file:line
    errors)."""
    sets = [
        (f"shipped set {name}", read_labelled(path))
        for name, path in shipped_sets().items()
        if not name.endswith(TUNED_SUFFIX)
    ]
    return sets + ([(str(user_file), read_labelled(user_file))] if user_file else [])


def _spec_key(check) -> str:
    return type(check).__name__ + check.model_dump_json()


def measured_checks(
    checks: Iterable[Check],
    candidates: Sequence[str],
    user_file: Path | None = None,
    tokenizer: Callable[[], object] | None = None,
) -> dict[str, CheckRates]:
    """check id -> its confusion counts on the labelled rows of the same spec; a check with no
    such row is left out. `tokenizer`: called once if a matched row is cut into windows."""
    wanted: dict[str, list[str]] = {}
    for check in checks:
        if check.type != "judge":
            wanted.setdefault(_spec_key(check), []).append(check.id)
    rows, sources = [], {}
    for source, labelled in labelled_sets(user_file):
        for row in labelled:
            key = _spec_key(row.check)
            if key in wanted:
                rows.append(row)
                sources.setdefault(key, set()).add(source)
    if not rows:
        return {}
    windowed = any(row.window is not None for row in rows)
    scored = score_labelled(rows, candidates, tokenizer() if windowed and tokenizer else None)
    counts: dict[str, dict[str, int]] = {}
    for item in scored:
        # every outcome present: a check that never passed a violating text has false_pass 0
        zero = dict.fromkeys(("true_pass", "false_fail", "true_fail", "false_pass"), 0)
        slot = counts.setdefault(_spec_key(item.row.check), zero)
        slot[item.outcome] = slot.get(item.outcome, 0) + 1
    return {
        check_id: CheckRates(check_id, **counts[key], source=", ".join(sorted(sources[key])))
        for key, ids in wanted.items()
        if key in counts
        for check_id in ids
    }
