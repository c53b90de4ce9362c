"""The base of every result file's row model, the key column names, and the frame helpers.

One row model per CSV of a run folder (docs/architecture.md, "Files of a run folder"): its
fields are the file's columns in order, each field's docstring the column's doc. Key columns
share one set of names (below) and one doc each; intervals are `<metric>_low` and
`<metric>_high`. Adding a column is one field in its model. Columns that several files share
beyond the keys (a measurement with its docs) are declared once in a `FieldGroup`, which a row
model takes as a base and places after one of its columns (`place`).
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

# One experimental condition: what a run compares (item ids are unique across suites).
CONDITION = ("model", "item", "policy")
# The same condition with its suite named (files the scoring stage writes carry the task).
TASK_CONDITION = ("model", "task", "item", "policy")
# One sample within a condition.
SAMPLE = ("seed", "sample")
# One sample within a condition when the rows may come from several runs (`harness score`).
RUN_SAMPLE = ("run_id", "seed", "sample")
# One generation record of a run: a condition and a sample index.
RECORD = (*CONDITION, "sample")


def pair_id(item: str, policy: str, sample: int) -> str:
    """The `pair` of a probed record in the probe files (its prompt against the baseline's):
    `<item>/<policy>/<sample>`."""
    return f"{item}/{policy}/{sample}"


# The doc of a column shared by several files (a field's own docstring takes precedence).
SHARED_DOCS = {
    "run_id": "the run that produced the row: first 12 hex of the hash of the run's config "
    "(`harness score`: of the scored file and its settings, manifest.json `run_id`)",
    "model": "the generating model (in probe files the probe model: a twin is `untrained:<name>`)",
    "task": "the item's suite",
    "item": "the task item's id",
    "policy": "the policy label, e.g. `none`, `periodic-128-user`",
    "seed": "the sample's seed",
    "sample": "0-based sample index within the condition",
    "pair": '`"<item>/<policy>/<sample>"`, or `all` for a fit pooled over the pairs',
    "layer": "hidden-state index (0 = embeddings, L = last layer)",
    "t": "continuation position, 1-based (see Positions)",
    "t_unit": "the unit every position of the row (t, t_start, fork_t, half-lives, fit ranges) "
    "is counted in: `tokens` (the model's tokenizer), or on a chat endpoint `chars`, "
    "`tiktoken:<encoding>`, `hf:<model>`, or `logprobs+<unit>` (the endpoint's tokens for the "
    "model's replies, <unit> for the text the harness writes) (docs/hosted.md)",
    "turn": "conversation turn, 1-based (1 in a single reply)",
    "check": "the check's id (a repeated id on one item gets `#2`, `#3`...)",
    "scope": "the check's scope: `window` or `response`",
    "value": "the check's score (NaN: undetermined)",
    "passed": "the check's verdict; empty when it could not decide",
    "reason": "why a value is missing or undetermined; empty otherwise",
    "metric": "the metric the row measures",
    "n": "the units the row's intervals rest on",
    "method": 'the method of the row\'s interval (docs/architecture.md, "Statistics")',
    "fork_t": "continuation tokens both arms share before they continue (see Forks)",
    "auc": "mean of a(t) over the condition's grid points",
    "half_life": "first t where a(t) < a(first) / 2; NaN when censored",
    "half_life_censored": "a(t) never fell below half its first value within the run",
    "final": "mean a(t) over the last quarter of the grid points",
    "survival_median": "Kaplan-Meier median t of the first failing window; inf if < half fail",
    "a_first": "adherence at the first grid point (turn)",
    "a_last": "adherence at the last turn",
    "tokens_generated": "generated tokens, summed over the samples",
    "tokens_injected": "injected (reminder, `Continue.`) tokens, summed over the samples",
    "tokens_restated": "restatement tokens, summed over the samples",
    "token_overhead": "(injected + restated) / generated tokens, summed over the samples",
    "spearman": "Spearman's rank correlation of x and y",
    "pearson": "Pearson's correlation of x and y",
    "x": "the first variable", "y": "the second variable",
    "r2": "R^2 of the log-log fit",
    "kappa": "Cohen's kappa of the two checks' verdicts",
    "accuracy": "share of the decided windows where the two checks agree",
    "agree_pass": "windows both passed", "agree_fail": "windows both failed",
    "judge_only_pass": "windows only the judge passed",
    "code_only_pass": "windows only the code check passed",
    "n_windows": "determined windows", "n_violations": "failed windows",
    "folds": "GroupKFold folds (by sample)",
    "min": "the gate's lower bound (NaN: none)", "max": "the gate's upper bound (NaN: none)",
}  # fmt: skip
# An interval bound's doc (the one interval convention: `<metric>_low`, `<metric>_high`).
# `<metric>_n` and `<metric>_method`: the units and the method of that interval (harness.stats).
BOUND_DOCS = {
    "low": "lower bound of {}'s interval",
    "high": "upper bound of {}'s interval",
    "n": "units {}'s interval rests on",
    "method": 'method of {}\'s interval (docs/architecture.md, "Statistics")',
}

_KINDS = {str: "str", int: "int", float: "float", bool: "bool"}
# the `t_unit` of every engine but chat: a token of the model's own tokenizer
MODEL_TOKENS = "tokens"


class FieldGroup(BaseModel):
    """Columns that several files share, declared once with their types and docstrings. A
    row model takes the group as a base and says which column the group follows (`place`):
    pydantic puts a base's fields first, `ResultRow.columns` puts them where the file has them,
    so sharing a group never reorders a CSV."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ResultRow(BaseModel):
    """One row of a result file. Subclasses set the file's metadata (class variables) and
    declare its columns as fields, in order, each with a docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    file: ClassVar[str] = ""
    written_by: ClassVar[str] = ""  # the stage
    row: ClassVar[str] = ""  # what one row means
    keys: ClassVar[tuple[str, ...]] = ()  # the columns that identify a row
    # Columns whose names depend on the run (summary.csv's alpha_L<k>): a pattern, all float,
    # placed after the column `extra_after`.
    extra_pattern: ClassVar[str | None] = None
    extra_after: ClassVar[str | None] = None
    extra_doc: ClassVar[str] = "per-run columns"
    # The FieldGroup bases and the column each one's fields follow, in order (a group may
    # follow a column of a group placed before it).
    place: ClassVar[dict[type[FieldGroup], str]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.columns()  # a group without a place, or placed after no column, fails here

    @classmethod
    def columns(cls) -> list[str]:
        """The file's columns in order: the model's own fields as declared, each field
        group's inserted after the column `place` names."""
        groups = [b for b in cls.__mro__[1:] if issubclass(b, FieldGroup) and b is not FieldGroup]
        unplaced = [group.__name__ for group in groups if group not in cls.place]
        if unplaced or len(cls.place) != len(groups):
            raise TypeError(f"{cls.__name__}: place every field group it takes ({unplaced})")
        grouped = {name for group in groups for name in group.model_fields}
        names = [name for name in cls.model_fields if name not in grouped]
        for group, after in cls.place.items():
            if after not in names:
                raise TypeError(f"{cls.__name__}: {group.__name__} follows no column '{after}'")
            at = names.index(after) + 1
            names[at:at] = list(group.model_fields)
        return names

    @classmethod
    def column_doc(cls, name: str) -> str:
        own = cls.model_fields[name].description or SHARED_DOCS.get(name, "")
        base, _, side = name.rpartition("_")
        if side in BOUND_DOCS and base in cls.model_fields:
            bound = BOUND_DOCS[side].format(f"`{base}`")
            return f"{bound}; {own}" if own else bound
        return own


def column_kind(row: type[ResultRow], name: str) -> tuple[str, bool, tuple[Any, ...] | None]:
    """(base kind str|int|float|bool, nullable, allowed values of a Literal or None)."""
    if name not in row.model_fields:  # an extra column (pattern): a float
        return "float", True, None
    annotation = row.model_fields[name].annotation
    args = typing.get_args(annotation)
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        nullable = type(None) in args
        annotation = next(a for a in args if a is not type(None))
        args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Literal:
        return "str", nullable, args
    return _KINDS[typing.cast(type, annotation)], nullable, None


def frame_columns(row: type[ResultRow], present: Iterable[str]) -> list[str]:
    """The declared columns in order, with the extra columns among `present` after
    `extra_after`. Raises ValueError on a column the model does not declare."""
    declared = row.columns()
    extra = [c for c in present if c not in row.model_fields]
    if extra and (row.extra_pattern is None or not all(_is_extra(row, c) for c in extra)):
        raise ValueError(f"{row.file}: undeclared column(s) {', '.join(extra)}")
    if not extra:
        return declared
    assert row.extra_after is not None, f"{row.file}: extra_pattern without extra_after"
    at = declared.index(row.extra_after) + 1
    return [*declared[:at], *extra, *declared[at:]]


def _is_extra(row: type[ResultRow], name: str) -> bool:
    return row.extra_pattern is not None and re.fullmatch(row.extra_pattern, name) is not None


def result_frame(row: type[ResultRow], rows: Any = ()) -> pd.DataFrame:
    """`rows` (row models, dicts or a DataFrame) as a frame of `row`'s columns in declared
    order, every cell checked against its column's type. Values are kept as given (the CSV
    writes them unchanged). Raises ValueError naming the file, the column and a bad value."""
    if isinstance(rows, pd.DataFrame):
        frame = rows
    elif (
        row.extra_pattern is None
        and isinstance(rows, list)
        and rows
        and all(type(r) is row for r in rows)
    ):
        # rows of this very model are flat: their fields, column by column, make the same
        # frame as their dumps row by row, at half the cost (~200,000 rows per 10,000 logged
        # conversations)
        fields = [r.__dict__ for r in rows]
        frame = pd.DataFrame({c: [f[c] for f in fields] for c in row.columns()})
    else:
        rows = [r.model_dump() if isinstance(r, BaseModel) else r for r in rows]
        present = _present_keys(rows) if rows else row.columns()
        frame = pd.DataFrame(rows, columns=[c for c in frame_columns(row, present) if c in present])
    lacking = [c for c in row.columns() if c not in frame.columns]
    # a column declared with a default reads as it where absent (files, and callers' rows,
    # from before it existed)
    filled = [c for c in lacking if not row.model_fields[c].is_required()]
    # a row's unit of t left out of rows given as dicts reads as the column's default
    if "t_unit" in frame.columns and "t_unit" in row.model_fields and frame["t_unit"].isna().all():
        frame = frame.assign(t_unit=row.model_fields["t_unit"].default)
    if filled:
        frame = frame.assign(**{c: row.model_fields[c].default for c in filled})
        lacking = [c for c in lacking if c not in filled]
    if lacking:
        raise ValueError(f"{row.file}: missing column(s) {', '.join(lacking)}")
    columns = frame_columns(row, frame.columns)
    # a frame already in column order is not copied cell by cell (a written windows.csv of
    # 10,000 conversations is ~50 MiB of frame): a shallow copy, whose columns are its own
    same = list(frame.columns) == list(columns)
    frame = frame.copy(deep=False) if same else frame.reindex(columns=columns)
    for name in frame.columns:
        problem = column_problem(row, name, frame[name])
        if problem:
            raise ValueError(f"{row.file}: column {name}: {problem}")
    return frame


def _present_keys(rows: list[dict[str, Any]]) -> list[str]:
    """Every key of `rows` in the order of its first appearance. Rows mostly share one set of
    keys: when the union of all of them (a C-level pass) is no larger than the first row's,
    they are the first row's, in its order, without a Python step per key of every row."""
    if len(set().union(*rows)) == len(rows[0]):
        return list(rows[0])
    return list(dict.fromkeys(k for r in rows for k in r))


def typed_frame(row: type[ResultRow], frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` checked against `row` (`result_frame`), its bool columns holding Python bools
    and None (not strings, not NaN), so readers test `v is True` and nothing else."""
    frame = frame.copy()
    for name in frame.columns:
        if name in row.model_fields and column_kind(row, name)[0] == "bool":
            frame[name] = _as_bools(frame[name])
    return result_frame(row, frame)


def typed_chunks(
    row: type[ResultRow], path: Path, rows: int | None = None
) -> Iterator[pd.DataFrame]:
    """A result CSV read back as typed frames (`typed_frame`) of at most `rows` rows (None:
    one frame), strings kept strings (an item id "1" stays "1"; empty cells ""). A file of
    its header alone gives one empty frame of its columns."""
    strings = [c for c in row.columns() if column_kind(row, c)[0] == "str"]
    options = {"dtype": dict.fromkeys(strings, str), "low_memory": False}
    if rows is None:
        chunks: Iterable[pd.DataFrame] = [pd.read_csv(path, **options)]
    else:
        chunks = pd.read_csv(path, chunksize=rows, **options)
    empty = True
    for frame in chunks:
        if frame.empty:
            continue
        empty = False
        for name in set(strings) & set(frame.columns):
            frame[name] = frame[name].fillna("").astype(object)
        yield typed_frame(row, frame)
    if empty:
        yield result_frame(row, [])


_BOOL_TEXT = {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}


def as_bool(value: Any) -> bool | None:
    """A bool cell however it arrived (a bool, numpy's bool, "True"/"False" or 1/0 read back
    from a CSV; empty, NaN or anything else: None). The one parser of boolean cells."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str):
        return _BOOL_TEXT.get(value.strip().lower())
    if isinstance(value, int | float) and not math.isnan(value):
        return _BOOL_TEXT.get(f"{float(value):.1f}")
    return None


def cells_are(values: pd.Series, verdict: bool) -> pd.Series:
    """Where `as_bool(cell) is verdict`, a bool Series: by a hash lookup when the cells are
    bools and nulls alone (0 and 1.0, which `as_bool` reads as bools too, cannot be among
    them), else cell by cell (~200,000 cells per 10,000 logged conversations, read a chunk at
    a time by every digest)."""
    if values.dtype == bool:
        return values == verdict
    if pd.api.types.infer_dtype(values, skipna=True) == "boolean":
        return values.isin([verdict])
    return values.map(lambda v: as_bool(v) is verdict)


def _as_bools(values: pd.Series) -> pd.Series:
    return values.map(as_bool).astype(object)


def column_problem(row: type[ResultRow], name: str, values: pd.Series) -> str | None:
    """Why `values` cannot be column `name` of `row` (None when they can): a vectorised
    check of every cell against the field's type (NaN counts as null; a float may be NaN)."""
    kind, nullable, allowed = column_kind(row, name)
    if _valid_by_dtype(values, kind, allowed):
        return None
    null = values.isna()
    if not nullable and kind in ("str", "int", "bool") and null.any():
        return f"empty at row {int(null.to_numpy().argmax())}"
    cells = values[~null]
    if _all_of_kind(cells, kind, allowed):
        return None
    if kind == "str":
        bad = ~cells.map(lambda v: isinstance(v, str) and (allowed is None or v in allowed))
    elif kind == "bool":
        bad = ~cells.map(lambda v: isinstance(v, bool) or type(v).__name__ == "bool_")
    elif pd.api.types.is_bool_dtype(cells) or not pd.api.types.is_numeric_dtype(cells):
        bad = ~cells.map(lambda v: _is_number(v, kind))
    elif kind == "int":
        bad = cells != cells.round()
    else:
        return None
    if bad.any():
        first = cells[bad].iloc[0]
        what = f"one of {', '.join(map(str, allowed))}" if allowed else f"a {kind}"
        return f"{first!r} is not {what}" if isinstance(first, str) else f"{first} is not {what}"
    return None


def _valid_by_dtype(values: pd.Series, kind: str, allowed: tuple[Any, ...] | None) -> bool:
    """Every cell valid, nulls included, as the column's dtype or pandas' C type scan shows
    without a null mask or a copy of the non-null cells (~1,700 columns checked per 2,500
    logged conversations); False when unsure, for the cell-by-cell check to decide."""
    dtype = values.dtype
    if kind == "float":  # NaN is a float: any numeric dtype but bool is a float column
        return bool(
            pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        )
    if kind == "int":  # numpy's integers hold no NaN and no fraction
        return isinstance(dtype, np.dtype) and dtype.kind in "iu"
    if kind == "bool" and isinstance(dtype, np.dtype) and dtype.kind == "b":
        return True
    # skipna=False there: a None or NaN among the cells makes them "mixed", never valid
    return _all_of_kind(values, kind, allowed)


def _all_of_kind(cells: pd.Series, kind: str, allowed: tuple[Any, ...] | None) -> bool:
    """Every cell a str (of `allowed`) or a bool, for column kind str or bool, found by
    pandas' C type scan instead of a Python call per cell (the per-cell test below names the
    first bad one); False when unsure."""
    if kind not in ("str", "bool") or cells.dtype != object:
        return False
    inferred = pd.api.types.infer_dtype(cells, skipna=False)
    if kind == "bool":
        return bool(inferred == "boolean")
    if inferred != "string":
        return False
    return allowed is None or bool(cells.isin(list(allowed)).all())


def _is_number(value: Any, kind: str) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return kind == "float" or number == round(number)
