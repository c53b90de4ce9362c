"""A check's error rate, measured on labelled replies.

A labelled reply is a text, a check spec in the form a suite item's `checks:` entry takes, and
whether the reply complies (`expected`). The rows are scored through the run's own scoring
path (`score_checks`; a row with `window` is first cut into windows by `split_windows`, as a
run cuts its replies) and counted per check and length band as a confusion table: true pass,
false fail, true fail, false pass, abstained (no verdict). Sensitivity (a compliant reply
passes) and specificity (a violating reply fails) get exact Clopper-Pearson intervals from
`harness.stats`. The shipped sets live in `harness/checks/validation/*.jsonl`; a user's own
JSONL file of the same rows is read by `read_labelled` (bad lines: `file:line: problem`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.checks import Check, CheckSpec
from harness.config.run import DEFAULT_CANDIDATE_LANGUAGES
from harness.errors import UserError
from harness.scoring.score import score_checks
from harness.scoring.windows import response_text, split_windows
from harness.stats import DEFAULT_LEVEL, binomial_interval
from harness.text.records import GenerationRecord, Segment
from harness.userfiles import user_json_objects

# Length bands of a reply in characters: [low, high), the last one closed.
BANDS: tuple[tuple[str, int, int], ...] = (
    ("<10", 0, 10),
    ("10-30", 10, 30),
    ("30-80", 30, 80),
    ("80-200", 80, 201),
    (">200", 201, 10**9),
)
ALL = "all"  # the band / stratum of a row that sums every band / stratum


def length_band(text: str) -> str:
    """The band of a reply's length in characters (leading/trailing whitespace aside)."""
    n = len(text.strip())
    return next(name for name, low, high in BANDS if low <= n < high)


class LabelledReply(BaseModel):
    """One labelled row: `expected` True when the reply complies with `check`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    check: CheckSpec
    expected: bool
    id: str | None = None
    stratum: str = ""
    """a subset reported apart (e.g. `mixed`: replies in two languages, labelled by most
    letters); empty for the main set"""
    window: int | None = Field(None, gt=0)
    """tokens per window: the reply is cut as a run cuts it and passes when no window fails
    and one passes; None: the text is one window (or the response)"""
    reminder: str | None = None
    """an injected reminder inside the reply, after `reminder_at` characters (needs `window`):
    the windows skip its tokens as a run's windows do"""
    reminder_at: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _reminder_needs_window(self) -> LabelledReply:
        if self.reminder is not None and self.window is None:
            raise ValueError("'reminder' needs 'window' (the reply is cut into windows)")
        if self.reminder_at > len(self.text):
            raise ValueError(f"'reminder_at' {self.reminder_at} is past the text's end")
        return self

    @property
    def band(self) -> str:
        return length_band(self.text)


class ScoredReply(BaseModel):
    """A labelled row with the verdict the scoring path gave it."""

    model_config = ConfigDict(frozen=True)

    row: LabelledReply
    check: str  # the check's id, e.g. `language:fr`
    passed: bool | None
    reason: str

    @property
    def outcome(self) -> str:
        """true_pass / false_fail / true_fail / false_pass / abstained."""
        if self.passed is None:
            return "abstained"
        if self.row.expected:
            return "true_pass" if self.passed else "false_fail"
        return "false_pass" if self.passed else "true_fail"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"field '{loc}': {msg}" if loc else msg


def read_labelled(path: Path) -> list[LabelledReply]:
    """Every row of a JSONL file of labelled replies; a bad line is one UserError
    `file:line: problem` before anything is scored."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    rows = []
    for where, data in user_json_objects(path):
        try:
            rows.append(LabelledReply.model_validate(data))
        except ValidationError as exc:
            raise UserError(f"{where}: {_first_error(exc)}") from None
    if not rows:
        raise UserError(f"{path}: no labelled replies")
    return rows


def shipped_sets() -> dict[str, Path]:
    """name -> path of the validation sets shipped in the package (`language-test`, ...)."""
    folder = resources.files("harness.checks") / "validation"
    if not folder.is_dir():
        return {}
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".jsonl")
    }


def load_shipped(name: str) -> list[LabelledReply]:
    """A shipped set by name (see `shipped_sets`)."""
    sets = shipped_sets()
    if name not in sets:
        raise UserError(f"no shipped validation set '{name}' (have: {', '.join(sets)})")
    return read_labelled(sets[name])


class _Verdict(BaseModel):
    """The row type `score_checks` fills in for one labelled text (or one of its windows)."""

    index: int
    check: str
    value: float
    passed: bool | None
    reason: str


def _windows(row: LabelledReply, tokenizer) -> list[str]:
    """The row's window texts, cut by the run's `split_windows` (a reminder's tokens are
    injected, as a run injects them, and skipped by the windows); a response-scope check
    gets the whole reply without the reminder, as a run scores it."""
    if tokenizer is None:
        raise UserError("labelled rows with 'window' need a tokenizer (a model) to be cut")
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    before = encode(row.text[: row.reminder_at]) if row.reminder is not None else []
    reminder = encode(row.reminder) if row.reminder is not None else []
    after = encode(row.text[row.reminder_at :] if row.reminder is not None else row.text)
    segments = [Segment(kind="generated", start=0, end=len(before))] if before else []
    if reminder:
        segments.append(
            Segment(kind="injected", start=len(before), end=len(before) + len(reminder))
        )
    start = len(before) + len(reminder)
    segments.append(Segment(kind="generated", start=start, end=start + len(after)))
    record = GenerationRecord.from_transcript(
        {"item": "labelled", "continuation_ids": before + reminder + after, "segments": segments}
    )
    if row.check.scope == "response":  # a run scores these on the whole reply, reminder aside
        return [response_text(record, tokenizer)]
    return [w.text for w in split_windows(record, tokenizer, row.window)]


def _combined(verdicts: Sequence[bool | None]) -> bool | None:
    """A reply's verdict from its windows' (as the adaptive policy reads a window's checks):
    fails when one fails, passes when none fails and one passes, else undetermined."""
    if any(v is False for v in verdicts):
        return False
    return True if any(v is True for v in verdicts) else None


def score_labelled(
    rows: Sequence[LabelledReply],
    candidates: Sequence[str] | None = None,
    tokenizer=None,
    judges=None,
) -> list[ScoredReply]:
    """Each row's verdict through the scoring path, with the run's candidate languages
    (default: DEFAULT_CANDIDATE_LANGUAGES); `tokenizer` cuts the rows with `window`, `judges`
    (a JudgeRunner) scores judge checks."""
    languages = tuple(sorted(candidates or DEFAULT_CANDIDATE_LANGUAGES))
    checks: dict[str, Check] = {}  # one bound check per distinct spec: one batch per check
    jobs: list[tuple[Check, dict, str]] = []
    for index, row in enumerate(rows):
        spec = row.check
        key = spec.model_dump_json()
        check = checks.setdefault(key, spec.bind(spec.base_id, languages))
        texts = [row.text] if row.window is None else _windows(row, tokenizer)
        jobs += [(check, {"index": index}, text) for text in texts]
    per_row: dict[int, list[_Verdict]] = {}
    for verdict in score_checks(_Verdict, jobs, judges):
        per_row.setdefault(verdict.index, []).append(verdict)
    scored = []
    for index, row in enumerate(rows):
        verdicts = per_row[index]
        passed = _combined([v.passed for v in verdicts])
        reason = "; ".join(dict.fromkeys(v.reason for v in verdicts if v.reason))
        scored.append(ScoredReply(row=row, check=verdicts[0].check, passed=passed, reason=reason))
    return scored


class Confusion(BaseModel):
    """The confusion counts of one group of scored rows (a check type, a length band...)."""

    model_config = ConfigDict(frozen=True)

    group: dict[str, str]
    true_pass: int = 0
    false_fail: int = 0
    true_fail: int = 0
    false_pass: int = 0
    abstained: int = 0

    @property
    def n(self) -> int:
        return self.true_pass + self.false_fail + self.true_fail + self.false_pass + self.abstained

    @property
    def decided(self) -> int:
        return self.n - self.abstained

    @property
    def right(self) -> int:
        return self.true_pass + self.true_fail

    @property
    def accuracy(self) -> float:
        """Right verdicts among all rows (an abstention counts as not right)."""
        return self.right / self.n if self.n else math.nan

    @property
    def abstention(self) -> float:
        return self.abstained / self.n if self.n else math.nan

    def sensitivity(self, level: float = DEFAULT_LEVEL) -> tuple[float, float, float, int]:
        """(estimate, low, high, n) of P(pass | complies) among decided compliant rows."""
        return _rate(self.true_pass, self.true_pass + self.false_fail, level)

    def specificity(self, level: float = DEFAULT_LEVEL) -> tuple[float, float, float, int]:
        """(estimate, low, high, n) of P(fail | violates) among decided violating rows."""
        return _rate(self.true_fail, self.true_fail + self.false_pass, level)

    def accuracy_interval(self, level: float = DEFAULT_LEVEL) -> tuple[float, float, float, int]:
        """(estimate, low, high, n) of right verdicts among all rows (abstentions: wrong)."""
        return _rate(self.right, self.n, level)


def _rate(k: int, n: int, level: float) -> tuple[float, float, float, int]:
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    low, high = binomial_interval(np.array([k]), np.array([n]), level=level)
    return k / n, float(low[0]), float(high[0]), n


GroupKey = Callable[[ScoredReply], str]
# The groupings a table can use: name -> the row's value.
GROUPINGS: dict[str, GroupKey] = {
    "check": lambda s: s.row.check.type,
    "check_id": lambda s: s.check,
    "band": lambda s: s.row.band,
    "stratum": lambda s: s.row.stratum or "main",
    # the language check's target; a check without one: its type
    "label": lambda s: str(getattr(s.row.check, "target", "") or s.row.check.type),
}


def confusions(
    scored: Iterable[ScoredReply], by: Sequence[str] = ("check", "band"), totals: bool = True
) -> list[Confusion]:
    """Confusion counts per group of `by` (names of GROUPINGS), in first-seen order; with
    `totals`, also each group with the last grouping summed (band `all`)."""
    unknown = [name for name in by if name not in GROUPINGS]
    if unknown:
        raise ValueError(f"unknown grouping(s) {unknown}; have {sorted(GROUPINGS)}")
    counts: dict[tuple[str, ...], dict[str, Any]] = {}
    for item in scored:
        keys = [tuple(GROUPINGS[name](item) for name in by)]
        if totals and by:
            keys.append((*keys[0][:-1], ALL))
        for key in keys:
            slot = counts.setdefault(key, {})
            slot[item.outcome] = slot.get(item.outcome, 0) + 1
    table = [Confusion(group=dict(zip(by, key, strict=True)), **c) for key, c in counts.items()]
    order = {name: i for i, (name, _, _) in enumerate(BANDS)} | {ALL: len(BANDS)}
    last = by[-1] if by else None
    return sorted(
        table,
        key=lambda c: (
            tuple(c.group[name] for name in by[:-1]),
            order.get(c.group[last], 0) if last == "band" else 0,
            c.group[last] if last and last != "band" else "",
        ),
    )
