"""Read a run folder's stored files into one `RunData`, validating before anything is written.

The report never re-runs a stage: it reads generations.jsonl, the CSVs and manifest.json as
stored. Every file is optional (its section then says it is missing), but a folder with none
of them, or a file that cannot be parsed, is a `UserError` naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import UserError
from harness.userfiles import user_json_objects

CSV_FILES = (
    "windows.csv",
    "adherence.csv",
    "adherence_curve.csv",
    "survival.csv",
    "divergence.csv",
    "nexttoken.csv",
    "fits.csv",
    "summary.csv",
    "correlation.csv",
    "predictor.csv",
    "policies.csv",
    "calibration.csv",
    "relay.csv",
    "bias.csv",
    "gates.csv",
    "carried.csv",
    "linkage.csv",
    "turns.csv",
    "turn_adherence.csv",
    "conversations.csv",
)
KNOWN_FILES = (*CSV_FILES, "generations.jsonl", "forks.jsonl", "manifest.json")

# Columns a file must have for its section to use it; a file without them is reported as
# unusable (not an error: an older or partial run still gets the rest of its report).
REQUIRED_COLUMNS = {
    "divergence.csv": {"model", "pair", "layer", "t", "rel_l2"},
    "fits.csv": {"model", "layer", "metric", "alpha"},
    "summary.csv": {"model", "item", "policy"},
    "policies.csv": {"model", "item", "policy", "metric", "value"},
    "calibration.csv": {"model", "item", "judge", "code", "n", "accuracy", "kappa"},
    "relay.csv": {"layer", "t", "delta", "local_alpha"},
    "bias.csv": {"model", "lam", "layer", "alpha"},
    "windows.csv": {"model", "item", "policy", "sample", "window", "t_start", "t_end", "passed"},
    "carried.csv": {"model", "item", "policy", "fork_t", "adherence_with", "adherence_without"}
    | {"dependence", "dependence_low", "dependence_high", "kl"},
    "linkage.csv": {"kind", "model", "item", "n", "items", "spearman", "spearman_low"}
    | {"spearman_high"},
    "gates.csv": {"gate", "metric", "use", "policy", "item", "model", "value", "min", "max"}
    | {"passed", "detail"},
    "turn_adherence.csv": {"model", "item", "policy", "turn", "a", "a_low", "a_high"}
    | {"survival", "survival_low", "survival_high"},
    "conversations.csv": {"model", "item", "policy", "mean", "a_first", "a_last"}
    | {"first_fail_median", "pressure_turn", "before", "after", "pressure_delta"}
    | {"token_overhead"},
}


@dataclass
class RunData:
    run_dir: Path
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    generations: list[dict[str, Any]] | None = None
    forks: list[dict[str, Any]] | None = None  # forks.jsonl: the fork arms' texts
    manifest: dict[str, Any] | None = None
    problems: dict[str, str] = field(default_factory=dict)  # file -> why it is not used

    def frame(self, name: str) -> pd.DataFrame | None:
        return self.frames.get(name)

    def missing(self, name: str) -> str:
        """One sentence for a section whose input is absent or unusable."""
        if name in self.problems:
            return f"{name} is not usable: {self.problems[name]}."
        return f"{name} is not in this run folder, so this part is left out."


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        # Strings stay strings: an item id "1" or a model "nan" must not become a number.
        frame = pd.read_csv(path, keep_default_na=True, low_memory=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from exc
    for col in (
        "model", "item", "policy", "task", "pair", "check", "reason", "features", "judge", "code",
        "kind",
    ):  # fmt: skip
        if col in frame.columns:
            frame[col] = frame[col].astype("string").fillna("").astype(object)
    return frame


def _read_generations(path: Path) -> list[dict[str, Any]]:
    return [record for _, record in user_json_objects(path)]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise UserError(f"{path}: must hold a JSON object")
    return manifest


def load_run(run_dir: Path) -> RunData:
    """Read every known file of `run_dir`. Raises UserError on a missing folder, a folder with
    no run files, or a file that cannot be parsed."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: is not a folder")
    present = [name for name in KNOWN_FILES if (run_dir / name).is_file()]
    if not present:
        raise UserError(
            f"{run_dir}: not a run folder (no generations.jsonl, manifest.json or result CSV)"
        )
    data = RunData(run_dir=run_dir)
    for name in CSV_FILES:
        if name not in present:
            continue
        frame = _read_csv(run_dir / name)
        lacking = REQUIRED_COLUMNS.get(name, set()) - set(frame.columns)
        if frame.empty:
            data.problems[name] = "the file has no rows"
        elif lacking:
            data.problems[name] = f"missing column(s) {', '.join(sorted(lacking))}"
        else:
            data.frames[name] = frame
    if "generations.jsonl" in present:
        data.generations = _read_generations(run_dir / "generations.jsonl")
    if "forks.jsonl" in present:
        data.forks = _read_generations(run_dir / "forks.jsonl")
    if "manifest.json" in present:
        data.manifest = _read_manifest(run_dir / "manifest.json")
    return data


def ci_columns(frame: pd.DataFrame, base: str) -> tuple[str, str] | None:
    """The (low, high) CI column names of `base` under the spellings the stages use."""
    stems = [f"{base}_" if base else "", f"{base}_ci_" if base else "ci_"]
    for stem in stems:
        for low, high in (("low", "high"), ("lo", "hi")):
            if f"{stem}{low}" in frame.columns and f"{stem}{high}" in frame.columns:
                return f"{stem}{low}", f"{stem}{high}"
    return None
