"""File-level scoring: JSONL in, `windows.csv` and adherence CSVs out (atomic writes)."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Sequence
from pathlib import Path

from harness.config.run import GenerationConfig, ScoringConfig, TaskSuite
from harness.errors import UserError
from harness.models import EMBEDDED_MODEL, locate_model, model_files, trained_name
from harness.scoring.adherence import GateLevels, adherence_summary, summary_frame
from harness.scoring.curves import adherence_curves, count_curves
from harness.scoring.digest import WindowDigest, window_digest
from harness.scoring.inputs import read_records, score_run_id
from harness.scoring.judge import JudgeDefaults, JudgeRunner, check_judges, judge_checks_of
from harness.scoring.score import item_checks, item_index, rows_frame, score_records
from harness.scoring.survival import survival_curves
from harness.store import RunStore, write_csv


@functools.cache
def load_tokenizer(name: str | None):
    """The tokenizer of a zoo model (default: the embedded model), loaded once per process;
    scoring needs no weights, so no model is built (`harness.models.model_files`)."""
    # an untrained twin has its base's tokenizer
    name = trained_name(name or EMBEDDED_MODEL)
    return tokenizer_at(model_files(locate_model(name)))


def tokenizer_at(path: Path):
    """The tokenizer of a model folder. AutoTokenizer imports torch (transformers' generation
    config does), ~500 MiB of RSS that scoring never uses; a folder whose tokenizer_config names
    the plain fast tokenizer (`TokenizersBackend`, the class AutoTokenizer builds for it, as for
    the embedded model) is loaded through that class alone."""
    try:
        config = json.loads((Path(path) / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if isinstance(config, dict) and config.get("tokenizer_class") == "TokenizersBackend":
        from transformers.tokenization_utils_tokenizers import TokenizersBackend

        return TokenizersBackend.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def adherence_frames(
    windows,
    *,
    level: float = 0.95,
    anytime: bool = False,
    horizon: float | None = None,
    rates: dict | None = None,
    gate_level: GateLevels | None = None,
) -> dict:
    """The adherence files of a scored set of windows (a frame, or their `WindowDigest`), by
    file name: per-condition metrics
    (adherence.csv), a(t) with CI bands (adherence_curve.csv), Kaplan-Meier (survival.csv).
    anytime: the intervals are confidence sequences (harness.stats); horizon: the fixed
    t-range of the per-sample values (harness.scoring.adherence.sample_values); rates: the
    checks' measured error by check id, for the corrected AUC (harness.scoring.corrected)."""
    # the passes once for the three files (a copy and a groupby each); a chat log's windows
    # come as the merged digest of its chunks (`WindowDigest`), never as one frame
    digest = windows if isinstance(windows, WindowDigest) else window_digest(windows)
    if digest.passes is None:
        return _log_frames(digest, level, anytime, horizon, rates, gate_level)
    passes = digest.passes
    summary = adherence_summary(
        None, level=level, anytime=anytime, horizon=horizon, rates=rates,
        gate_level=gate_level, passes=passes, abstain=digest.abstain,
    )  # fmt: skip
    return {
        "adherence.csv": summary_frame(summary),
        "adherence_curve.csv": adherence_curves(None, level=level, anytime=anytime, passes=passes),
        "survival.csv": survival_curves(passes, level=level),
    }


def _log_frames(digest: WindowDigest, level, anytime, horizon, rates, gate_level) -> dict:
    """`adherence_frames` of a chat log's merged chunk digests: per-sample values made with
    each sample's own span and a(t) as counts, for fixed-sample intervals (what a log's
    analysis asks)."""
    if anytime or horizon is not None:
        raise ValueError("a chat log's digest holds fixed-sample counts over each sample's span")
    summary = adherence_summary(
        None, level=level, rates=rates, gate_level=gate_level, abstain=digest.abstain,
        conditions=digest.conditions,
    )  # fmt: skip
    failures = {key: (v.durations, v.events) for key, v in digest.conditions.items()}
    return {
        "adherence.csv": summary_frame(summary),
        "adherence_curve.csv": count_curves(digest.counts, level=level),
        "survival.csv": survival_curves(None, level=level, failures=failures),
    }


def score_files(
    generations: Path,
    suites: Sequence[TaskSuite],
    out: Path,
    config: ScoringConfig,
    model: str | None = None,
) -> list[Path]:
    """Validate everything, score, then write windows.csv, adherence.csv, adherence_curve.csv
    and survival.csv into `out`. Returns the written paths. Judge checks default to `model`
    (else the embedded model) on vLLM; their verdicts are cached under `out/cache/judge/`."""

    index = item_index(suites)
    for _, item in index.values():
        item_checks(item, config.languages)  # fail on a bad check before reading any input
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    judge_checks = judge_checks_of(item for _, item in index.values())
    defaults = JudgeDefaults(model or EMBEDDED_MODEL, GenerationConfig())
    if judge_checks:
        check_judges(defaults, judge_checks)
    # (a missing file: read_records says so in one line)
    run_id = score_run_id(generations, suites, config, model=model) if generations.is_file() else ""
    records = read_records(generations, set(index), load_tokenizer, model, run_id)
    if model is not None:
        for record in records:
            record.model = record.model or model
    by_model: dict[str, list] = {}
    for record in records:
        by_model.setdefault(model or record.model or "", []).append(record)
    rows = []
    store = RunStore(out) if judge_checks else contextlib.nullcontext()
    with store as opened, JudgeRunner(opened, defaults) as judges:
        for name, group in by_model.items():
            tokenizer = load_tokenizer(name or None)
            rows.extend(score_records(group, suites, tokenizer, config, judges))
    windows = rows_frame(rows)
    frames = {"windows.csv": windows, **adherence_frames(windows)}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in frames.items():
        write_csv(frame, out / name)
        written.append(out / name)
    return written
