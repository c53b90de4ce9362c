"""Score generation records window by window: `windows.csv` rows.

`score_records` is the batch API of the pipeline; `window_fails` and `reply_fails` are the
pure-text API of the adaptive policy (did the last window violate the item's window-scope
checks? did the reply that just ended violate any of its code-checkable rules?).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from harness.checks import Check
from harness.config.run import DEFAULT_CANDIDATE_LANGUAGES, ScoringConfig, TaskItem, TaskSuite
from harness.errors import UserError
from harness.results import ResultRow, WindowRow, result_frame
from harness.scoring.windows import reply_text, response_text, split_windows
from harness.text.records import GenerationRecord

RESPONSE_WINDOW = -1  # `window` value of the rows of response-scope checks
WINDOW_COLUMNS = WindowRow.columns()

Row = TypeVar("Row", bound=ResultRow)


def item_index(suites: TaskSuite | Sequence[TaskSuite]) -> dict[str, tuple[str, TaskItem]]:
    """item id -> (suite name, item); ids must be unique across the suites."""
    suites = [suites] if isinstance(suites, TaskSuite) else list(suites)
    index: dict[str, tuple[str, TaskItem]] = {}
    for suite in suites:
        for item in suite.items:
            if item.id in index:
                raise UserError(
                    f"item id '{item.id}' appears in suites '{index[item.id][0]}' and "
                    f"'{suite.suite}': ids must be unique"
                )
            index[item.id] = (suite.suite, item)
    return index


_ITEM_CHECKS: dict[tuple[str, tuple[str, ...]], list[Check]] = {}


def item_checks(item: TaskItem, candidates: Sequence[str] | None = None) -> list[Check]:
    """The item's checks as scored, built once per (item, candidate set) and reused.

    `candidates` are the languages a language check tells its target apart from (default:
    DEFAULT_CANDIDATE_LANGUAGES). Two checks with one id on one item keep distinct ids: the
    second reports as `<id>#2`.
    """
    languages = tuple(sorted(candidates or DEFAULT_CANDIDATE_LANGUAGES))
    key = (item.model_dump_json(), languages)
    if key not in _ITEM_CHECKS:
        checks: list[Check] = []
        seen: dict[str, int] = {}
        for spec in item.checks:
            check_id = spec.base_id
            seen[check_id] = seen.get(check_id, 0) + 1
            if seen[check_id] > 1:
                check_id = f"{check_id}#{seen[check_id]}"
            checks.append(spec.bind(check_id, languages))
        _ITEM_CHECKS[key] = checks
    return _ITEM_CHECKS[key]


def score_records(
    records: Iterable[GenerationRecord],
    suite: TaskSuite | Sequence[TaskSuite],
    tokenizer,
    config: ScoringConfig | None = None,
    judges=None,
    memo: dict | None = None,
    as_dicts: bool = False,
) -> list[WindowRow]:
    """Rows for every (record, window, window-scope check) and (record, response-scope check).

    Scored by `score_checks` (`memo`, `as_dicts`: see there). `judges`: the JudgeRunner
    (`harness.scoring.judge`) that judge checks ask; None is an error only if there are any.
    """
    config = config or ScoringConfig()
    jobs = record_jobs(records, suite, tokenizer, config)
    rows = score_checks(WindowRow, jobs, judges, memo, as_dicts)
    rows.sort(key=row_key("run_id", "model", "item", "policy", "seed", "sample", "window", "turn"))
    return rows


def record_jobs(
    records: Iterable[GenerationRecord],
    suite: TaskSuite | Sequence[TaskSuite],
    tokenizer,
    config: ScoringConfig,
) -> list[tuple[Check, dict, str]]:
    """(check, the row's other columns, text) of every window-scope check on every window and
    every whole-reply check on every reply of these records: what `score_records` scores (and
    what a run's judge calls were asked, for their cost per condition)."""
    index = item_index(suite)
    jobs: list[tuple[Check, dict, str]] = []
    for record in records:
        if record.item not in index:
            raise UserError(f"record of item '{record.item}': no such item in the suites")
        task, item = index[record.item]
        windows = split_windows(record, tokenizer, config.window, config.sentence_aligned)
        finishes = record.reply_finishes()
        wheres = [_where(record, task, w, finishes) for w in windows]
        replies = None
        for check in item_checks(item, config.languages):
            if check.scope == "window":
                jobs += [(check, where, w.text) for where, w in zip(wheres, windows, strict=True)]
                continue
            # a whole-reply rule judges each reply: the conversation's, as in turns.csv
            replies = _replies(record, task, tokenizer, finishes) if replies is None else replies
            jobs += [(check, where, text) for where, text in replies]
    return jobs


def _replies(
    record: GenerationRecord, task: str, tokenizer, finishes: dict[int, str]
) -> list[tuple[dict, str]]:
    """(row columns, text) of each reply a whole-reply rule judges: the response of a single
    reply (its stretches joined by a newline), each reply of a conversation (`reply_text`)."""
    if not record.is_conversation:
        return [(_where(record, task, None, finishes), response_text(record, tokenizer))]
    out, generated = [], record.generated_positions()
    for turn, positions in record.turn_positions().items():
        if not positions:  # a reply whose request failed for good holds no token to judge
            continue
        where = dict(
            window=RESPONSE_WINDOW,
            turn=turn,
            t_start=positions[0] + 1,
            t_end=positions[-1] + 1,
            t_gen_start=1 + bisect.bisect_left(generated, positions[0]),
            finish_reason=finishes.get(turn, ""),
        )
        out.append(({**_ident(record, task), **where}, reply_text(record, tokenizer, positions)))
    return out


def row_key(*columns: str) -> Callable[[Any], tuple]:
    """A sort key over `columns` of rows given as models or as dicts (`as_dicts`)."""
    by_item, by_attr = operator.itemgetter(*columns), operator.attrgetter(*columns)
    return lambda r: by_item(r) if type(r) is dict else by_attr(r)


def score_checks(
    row: type[Row],
    jobs: Iterable[tuple[Check, dict, str]],
    judges,
    memo: dict | None = None,
    as_dicts: bool = False,
) -> list[Row]:
    """The one check-scoring routine (windows, conversation turns, fork arms): each job is
    (check, the row's other columns, text); every check scores all its distinct texts in one
    batch (lingua runs them in parallel, a judge check sends its uncached texts to its judge at
    once). Returns one `row` per job, in job order per check, checks in first-seen order, with
    the columns check, value, passed, reason (and scope, where `row` has it) filled in.
    `judges`: the JudgeRunner judge checks ask (None is an error only if there are any).
    `memo`: results by (check, text) shared by calls that score the same texts (a reply that
    fits in one window is that window's text too), filled in here. `as_dicts`: each row as
    the dict of its columns, unvalidated, for a caller that frames them at once
    (`results.result_frame` checks every column of the file; a logged conversation's ~24 rows
    cost 3x more as models)."""
    batches: dict[int, tuple[Check, list[tuple[dict, str]]]] = {}
    for check, base, text in jobs:
        batches.setdefault(id(check), (check, []))[1].append((base, text))
    with_scope, with_rule = "scope" in row.model_fields, "rule" in row.model_fields
    memo = {} if memo is None else memo
    rows: list[Row] = []
    for key, (check, entries) in batches.items():
        texts = [text for _, text in entries]
        todo = list(dict.fromkeys(t for t in texts if (key, t) not in memo))
        scored = check.with_judges(judges).score_many(todo) if todo else []
        memo.update(((key, t), result) for t, result in zip(todo, scored, strict=True))
        results = [
            check.when_cut_off(memo[(key, t)]) if _whole_reply(base) else memo[(key, t)]
            for base, t in entries
        ]
        # once per check, not per row: a bound check's id is a pydantic private attribute
        fixed: dict[str, Any] = {
            "check": check.id,
            **({"rule": check.rule or check.id} if with_rule else {}),
            **({"scope": check.scope} if with_scope else {}),
        }
        for (base, _), result in zip(entries, results, strict=True):
            verdict = {
                "value": result.value,
                "passed": check.passed(result),
                "reason": result.reason,
            }
            rows.append(
                {**base, **fixed, **verdict} if as_dicts else row(**base, **fixed, **verdict)
            )
    return rows


def _ident(record: GenerationRecord, task: str) -> dict:
    ident = {k: getattr(record, k) for k in ("run_id", "model", "item", "policy", "seed", "sample")}
    return {**ident, "task": record.task or task}


def _where(record: GenerationRecord, task: str, window, finishes: dict[int, str]) -> dict:
    """A windows.csv row's columns before the check's: the record's and the window's (the
    whole response's generated span for window None), with the turn of its reply and why
    that reply ended."""
    if window is None:
        positions = record.generated_positions()
        first, last = (positions[0] + 1, positions[-1] + 1) if positions else (0, 0)
        where = dict(window=RESPONSE_WINDOW, turn=1, t_start=first, t_end=last, t_gen_start=1)
    else:
        where = dict(
            window=window.index,
            turn=window.turn,
            t_start=window.t_start,
            t_end=window.t_end,
            t_gen_start=window.t_gen_start,
        )
    return {**_ident(record, task), **where, "finish_reason": finishes.get(where["turn"], "")}


def _whole_reply(base: dict) -> bool:
    """A row judging a whole reply (turns.csv's, windows.csv's window -1), cut at the token
    limit: its rule's verdict is what `Check.when_cut_off` leaves of it."""
    return base.get("finish_reason") == "length" and base.get("window", RESPONSE_WINDOW) < 0


def window_fails(item: TaskItem, text: str, languages: Sequence[str] | None = None) -> bool | None:
    """Did this window (the last `every` tokens of a reply under way) violate the item's
    window-scope checks? A whole-reply rule cannot judge a window: the reply has not ended.

    True: at least one check failed; False: none failed and at least one passed; None: no
    check could decide (e.g. too few letters). Checks that ask a model (judge checks) are
    skipped: this runs during generation, while the engine is busy with the samples.
    """
    checks = [c for c in item_checks(item, languages) if c.scope == "window"]
    return _fails(checks, text, cut_off=False)


def reply_fails(
    item: TaskItem, text: str, languages: Sequence[str] | None = None, cut_off: bool = False
) -> bool | None:
    """Did this ended reply violate any of the item's code-checkable rules (window-scope rules
    on the reply's text, whole-reply rules such as a sign-off or a word limit)? What the
    adaptive policy reads between the turns of a conversation. `cut_off`: the reply hit the
    token limit, so a whole-reply rule judges it as scoring does (`Check.when_cut_off`: no
    verdict where the reply's end is missing, rather than a failure the model did not make).
    True / False / None as `window_fails`; judge checks are skipped likewise."""
    return _fails(item_checks(item, languages), text, cut_off)


def _fails(checks: Sequence[Check], text: str, cut_off: bool) -> bool | None:
    verdicts = []
    for check in checks:
        if check.asks_model:
            continue
        result = check.score(text)
        result = check.when_cut_off(result) if cut_off else result
        verdicts.append(None if math.isnan(result.value) else check.passed(result))
    if any(v is False for v in verdicts):
        return True
    return False if any(v is True for v in verdicts) else None


def rows_frame(rows: Sequence[WindowRow]):
    """The rows as a pandas DataFrame with the `windows.csv` columns."""
    return result_frame(WindowRow, rows)
