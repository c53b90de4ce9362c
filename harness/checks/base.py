"""The Check base class, its result, and the registry that task suites validate against.

A check is one pydantic model: its fields are what a suite writes under `checks:` and its
methods score text. It scores one piece of text, a window of the output (scope `window`) or
the whole generated response (scope `response`), and returns a value in 0..1, or NaN when the
text does not let it decide (too few letters), with a short reason; `passed` turns the value
into passed / failed / undetermined (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal, Self, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harness.registry import CHECKS

Scope = Literal["window", "response"]
NAN = float("nan")


def _unset(value: object) -> bool:
    return value is None


NonEmptyText = Annotated[str, Field(min_length=1, pattern=r"\S")]


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float  # 0..1, NaN when undetermined
    reason: str = ""
    # The verdict, for checks whose pass rule needs more than `value` (the language check's
    # lead over the next candidate); None: `passed` decides from the value.
    verdict: bool | None = None

    @property
    def determined(self) -> bool:
        return not math.isnan(self.value)


# A rule that needs the end of a reply, on a reply cut at the token limit: neither kept nor
# broken (counted apart in the per-rule results).
CUT_OFF_REASON = "no verdict (cut off)"
CUT_OFF = CheckResult(value=NAN, reason=CUT_OFF_REASON)


class Check(BaseModel):
    """One check type: the spec fields of a suite's `checks:` entry and how it scores text.

    Subclasses declare `type` as a Literal of their type name(s), give `base_id`, implement
    `score`, and override `passed` when the pass rule is not "value is 1".
    """

    # Unknown keys are errors: a typo must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    scope: Scope = "window"
    # The rule this check enforces, as per-rule results, the report and gates name it (default:
    # the check's id), and the sentence of the system prompt it comes from (shown beside it).
    # Left out of dumps when unset: digests of suites written before these fields stay the same.
    rule: str | None = Field(None, min_length=1, exclude_if=_unset)
    sentence: str | None = Field(None, min_length=1, exclude_if=_unset)
    # A check that asks a model (the judge) needs a JudgeRunner at scoring time, given by
    # `with_judges`, and is skipped while generating (the adaptive policy's `window_fails`),
    # when the engine is busy with the generation itself.
    asks_model: ClassVar[bool] = False
    # Set by `bind`: an item that repeats a check reports the repeats as `<id>#2`, `<id>#3`...
    _bound_id: str | None = PrivateAttr(None)

    @property
    def base_id(self) -> str:
        """The id the spec gives, e.g. `language:fr` (the same for repeats of one check)."""
        raise NotImplementedError

    @property
    def id(self) -> str:
        """The id of this check's rows in windows.csv."""
        return self._bound_id or self.base_id

    def __eq__(self, other: object) -> bool:
        # The private state (compiled patterns, built IFEval instructions) follows from the
        # fields, and a built instruction has no equality of its own: compare spec and id.
        if not isinstance(other, Check):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__ and self.id == other.id

    def bind(self, check_id: str, candidates: Sequence[str]) -> Self:
        """A copy that reports as `check_id`; `candidates` are the run's candidate languages,
        for the checks that detect a language among them."""
        bound = self.model_copy()
        bound._bound_id = check_id
        return bound

    def with_judges(self, judges) -> Self:
        """The check ready to score with this JudgeRunner (None: no judge available); checks
        that ask no model are returned as they are."""
        return self

    def score(self, text: str) -> CheckResult:
        raise NotImplementedError

    def score_many(self, texts: Sequence[str]) -> list[CheckResult]:
        """Score a batch; checks with a faster batch path override this."""
        return [self.score(text) for text in texts]

    def when_cut_off(self, result: CheckResult) -> CheckResult:
        """The verdict on a whole reply that hit the token limit: `result` where more text
        could not change it (a window-scope rule judges the text there), `CUT_OFF` where the
        rule needs the reply's end (a sign-off; a word limit the reply had not reached yet).
        A whole-reply rule is CUT_OFF unless its class says which verdicts stand."""
        return result if self.scope == "window" else CUT_OFF

    def passed(self, result: CheckResult) -> bool | None:
        """Passes on 1 (followed), fails on 0 (violated), undetermined on NaN."""
        return None if math.isnan(result.value) else result.value >= 1.0


# type name -> check class; a suite's `checks:` entries validate against these classes (the
# package's modules and the `harness.checks` entry points: `harness.registry`).
CHECK_TYPES = CHECKS

CheckClass = TypeVar("CheckClass", bound=type[Check])


def register(cls: CheckClass) -> CheckClass:
    """Class decorator: suites may use the check under each name its `type` Literal allows."""
    names = get_args(cls.model_fields["type"].annotation)
    if not names or not all(isinstance(name, str) for name in names):
        raise TypeError(f"{cls.__name__}.type must be a Literal of the check's type name(s)")
    for name in names:
        known = CHECKS.peek(name)
        if known is not None and known is not cls:
            raise TypeError(
                f"check type {name!r} is registered twice ({known.__name__}, {cls.__name__})"
            )
    for name in names:
        CHECKS.add(name, cls)
    return cls


def rule_names(checks: Sequence[Check]) -> list[str]:
    """The rule each of an item's checks enforces: its `rule:`, else its id as scored (a
    repeated check's `<id>#2`, as `harness.scoring.score.item_checks` numbers them)."""
    seen: dict[str, int] = {}
    names = []
    for check in checks:
        seen[check.base_id] = seen.get(check.base_id, 0) + 1
        count = seen[check.base_id]
        names.append(check.rule or (check.base_id if count == 1 else f"{check.base_id}#{count}"))
    return names
