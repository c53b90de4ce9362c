"""Gate specs: the bounds a run's `gates:` put on summary.csv metrics, and the rules that say
whether a gate can be evaluated against a run config (docs/architecture.md, "Gates"). The
evaluation itself is `harness.analysis.gates`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.checks.base import NonEmptyText, rule_names
from harness.config.schema import Strict

# The summary.csv columns a gate may bound, and whether each has an interval
# (<metric>_low/_high).
GATE_METRICS: dict[str, bool] = {
    "auc": True,
    "half_life": True,
    "final": True,
    "survival_median": True,
    # ability and reliability (harness.scoring.reliability): pass^r, percentiles of the
    # per-sample AUCs; "cannot tell" (too few samples) reads undecided
    "pass_1": True,
    "pass_3": True,
    "pass_5": True,
    "aptitude": True,
    "unreliability": True,
    "survival_censored_share": False,
    "token_overhead": False,
    "alpha_mean": True,
    # over a conversation's turns (turn_adherence.csv, conversations.csv; with `rule:`,
    # rule_curves.csv and rules.csv): a(k) and S(k) at the gate's `turn`, and the first
    # failing turn (the first k where S(k) <= 0.5)
    "a_turn": True,
    "survival_turn": True,
    "first_fail_turn": True,
}
# The metrics read at one turn (the gate's `turn`), and those of conversations only.
TURN_METRICS = ("a_turn", "survival_turn")
CONVERSATION_METRICS = (*TURN_METRICS, "first_fail_turn")
# What a gate with `rule:` can bound (rules.csv, rule_curves.csv: each rule alone).
RULE_METRICS = ("auc", "final", "survival_median", *CONVERSATION_METRICS)
# The metrics summary.csv also carries corrected for the check's measured error
# (`<metric>_corrected`, harness.scoring.corrected), which `corrected: true` gates on.
CORRECTED_METRICS = ("auc",)
# What a sequential run's loop can decide: alpha_mean needs the probe, which runs once after
# it; aptitude and unreliability have fixed-n intervals only (no confidence sequence).
LOOP_METRICS = tuple(
    m
    for m in GATE_METRICS
    if m not in ("alpha_mean", "aptitude", "unreliability", *CONVERSATION_METRICS)
)
# The metrics with one-sided bounds `<metric>_lcb/_ucb` at the gates' level (the bounded means,
# harness.stats.sided): their interval gates test each bound one-sided at the full level.
ONE_SIDED = ("auc", "final")
# How the gates' error adds up over many checks (stats.family): `holm` (the default), Holm's
# step-down over the m bounds of the run's one-sided checks (auc, final): first each at
# 1 - (1 - level) / m, then, after r bounds are decided, the rest at 1 - (1 - level) / (m - r),
# so the chance that any of their verdicts is wrong is <= 1 - level and no check decides less
# than under `bonferroni`, each bound at 1 - (1 - level) / m throughout; `none`, each bound at
# stats.level alone (the chance of some wrong verdict grows with the checks: <= m (1 - level)).
Family = Literal["holm", "bonferroni", "none"]
FAMILY_METHODS = ("holm", "bonferroni")  # the families that bound the run's error
GateBound = Annotated[float, Field(allow_inf_nan=False)]
# Gates before three outcomes read one CI bound as a point; `interval` (the default) now reads
# both: a config still naming them is told what to write instead (gate_problem).
RETIRED_USES = ("ci_low", "ci_high")


class GateSpec(Strict):
    """A bound on one summary.csv metric of one policy (docs/architecture.md, "Gates");
    checked per model x item of the run: pass, fail or undecided."""

    metric: NonEmptyText
    policy: NonEmptyText  # a label as in records, e.g. `none`, `periodic-256-user`
    min: GateBound | None = None
    max: GateBound | None = None
    # None: `interval` for a metric with one, else `value` (see `gate_use`)
    use: Literal["interval", "value", "ci_low", "ci_high"] | None = None
    # true: bound `<metric>_corrected` (the estimate corrected for the check's measured
    # sensitivity and specificity) instead of the raw metric; `use` applies to it the same way
    corrected: bool = False
    items: list[NonEmptyText] | None = Field(None, min_length=1)  # None: every item of the run
    model: NonEmptyText | None = None  # None: every model of the run
    # one rule alone (its name in rules.csv: a check's `rule:`, else its id); None: all rules
    rule: NonEmptyText | None = None
    # the turn a(k) or S(k) is read at (a_turn, survival_turn)
    turn: int | None = Field(None, ge=1)


def gate_use(gate: GateSpec) -> str:
    """What the gate compares: `interval` (min against the lower bound, max against the upper
    one) or `value` (the point estimate). Unset: the interval when the metric has one."""
    if gate.use is not None:
        return gate.use
    return "interval" if GATE_METRICS.get(gate.metric, False) else "value"


def gate_column(gate: GateSpec) -> str:
    """The summary.csv column the gate bounds: the metric, or its corrected estimate."""
    return f"{gate.metric}_corrected" if gate.corrected else gate.metric


def one_sided(gate: GateSpec) -> bool:
    """Whether the gate's interval check reads one-sided bounds (`<metric>_lcb/_ucb`)."""
    return gate_use(gate) == "interval" and gate.metric in ONE_SIDED and not gate.corrected


def tested_bounds(gates: list[GateSpec], models: list[str], items: list[str]) -> int:
    """The bounds tested over every interval check of the run (a check is a gate x model x
    item; a gate with min and max tests two bounds); point comparisons test nothing."""
    total = 0
    for gate in gates:
        if gate_use(gate) == "interval":
            bounds = (gate.min is not None) + (gate.max is not None)
            total += bounds * len([gate.model] if gate.model else models) * len(gate.items or items)
    return total


def gate_level(
    gates: list[GateSpec], models: list[str], items: list[str], level: float, family: Family
) -> float:
    """The level each bound is first tested at: `level`, or 1 - (1 - level) / m over the run's
    m tested bounds (`family: bonferroni`, and Holm's first step); fixed by the config, before
    the data."""
    m = tested_bounds(gates, models, items) if family in FAMILY_METHODS else 1
    return 1 - (1 - level) / max(m, 1)


def gate_levels(
    gates: list[GateSpec], models: list[str], items: list[str], level: float, family: Family
) -> tuple[float, ...]:
    """Every level a bound may be tested at: (`gate_level`,), and under `holm` Holm's later
    steps 1 - (1 - level) / k for k = m - 1 .. 1 (where the one-sided bounds of summary.csv
    and rules.csv are also made: their `holm_bounds`). Fixed by the config, before the data."""
    first = gate_level(gates, models, items, level, family)
    if family != "holm":
        return (first,)
    m = tested_bounds(gates, models, items)
    return (first, *(1 - (1 - level) / k for k in range(m - 1, 0, -1)))


def gate_problem(
    gate: GateSpec, policies: list[str], models: list[str], probe: bool, family: Family = "none"
) -> str:
    """Why a gate cannot be evaluated against a run config ("" when it can)."""
    if gate.metric not in GATE_METRICS:
        return f"unknown metric '{gate.metric}' (expected one of {', '.join(GATE_METRICS)})"
    with_ci = ", ".join(m for m, ci in GATE_METRICS.items() if ci)
    if gate.use in RETIRED_USES:
        return (
            f"use: {gate.use} is retired: gates read the interval by default (min against its "
            "lower bound, max against its upper one; an interval across the bound is "
            "undecided), so drop `use`, or write `use: value` to compare the point estimate"
        )
    if gate.use == "interval" and not GATE_METRICS[gate.metric]:
        return (
            f"metric '{gate.metric}' has no interval, so use: interval is impossible ({with_ci} "
            "have one); drop `use` or write `use: value`"
        )
    if gate.corrected and gate.metric not in CORRECTED_METRICS:
        have = ", ".join(CORRECTED_METRICS)
        what = f"a metric with a corrected estimate ({have})"
        return f"corrected: true needs {what}, not '{gate.metric}'"
    if gate.metric in TURN_METRICS and gate.turn is None:
        return f"metric '{gate.metric}' needs turn: K (the turn it is read at)"
    if gate.turn is not None and gate.metric not in TURN_METRICS:
        return f"turn: is for {' and '.join(TURN_METRICS)}, not '{gate.metric}'"
    if gate.rule is not None and gate.metric not in RULE_METRICS:
        return (
            f"rule: bounds one rule alone (rules.csv), which has {', '.join(RULE_METRICS)}; "
            f"not '{gate.metric}'"
        )
    if gate.rule is not None and gate.corrected:
        return "corrected: true has no per-rule estimate (drop it or the rule)"
    if gate.min is None and gate.max is None:
        return "needs min, max or both"
    if gate.min is not None and gate.max is not None and gate.min > gate.max:
        return f"min {gate.min:g} is greater than max {gate.max:g}"
    if gate.policy not in policies:
        return f"policy '{gate.policy}' is not in the config's policies ({', '.join(policies)})"
    if gate.model is not None and gate.model not in models:
        return f"model '{gate.model}' is not in the config's models ({', '.join(models)})"
    if family == "bonferroni" and gate_use(gate) == "interval" and not one_sided(gate):
        return (
            f"stats.family: {family} bounds the error of every gate, and {gate_column(gate)}'s "
            f"interval is at stats.level only; gate {', '.join(ONE_SIDED)} (not corrected) or "
            "write `use: value`"
        )
    if gate.metric == "alpha_mean" and not probe:
        return "metric 'alpha_mean' needs probe.enabled: true"
    return ""


def _no_unit(gate: GateSpec, item, single_policies, conversation_policies) -> str:
    """Why `item` holds no unit of `gate` ("" when it holds one): the policy does not run
    there, the metric is over turns and it is a single reply, or no check of it is the rule."""
    runs = conversation_policies if item.is_conversation else single_policies
    if gate.policy not in runs:
        kind = "a conversation" if item.is_conversation else "a single reply"
        listed = "conversation_policies" if item.is_conversation else "policies"
        return f"policy '{gate.policy}' does not run on it ({kind}: the config's {listed})"
    if gate.metric in CONVERSATION_METRICS and not item.is_conversation:
        return f"metric '{gate.metric}' is over turns, and it is a single reply"
    if gate.rule is not None and gate.rule not in rule_names(item.checks):
        return f"rule '{gate.rule}' is none of its checks' ({', '.join(rule_names(item.checks))})"
    return ""


def gate_units(
    gate: GateSpec, items: list, single_policies: list[str], conversation_policies: list[str]
) -> list:
    """The items a gate judges (TaskItem): of `items` (its `items:`, else the run's), those
    that hold a unit of it: its policy runs there (conversation items run
    `conversation_policies`, single replies `policies`), a turn metric's are conversations,
    a rule gate's have the rule. A gate with no `items:` whose policy runs on some items only
    judges those; `gate_unit_problem` refuses one that judges none, and one whose named
    items hold no unit."""
    return [i for i in items if not _no_unit(gate, i, single_policies, conversation_policies)]


def gate_unit_problem(
    gate: GateSpec, items: list, single_policies: list[str], conversation_policies: list[str]
) -> str:
    """Why a gate would judge no unit of the run, or a named item of it holds none ("" when
    every item it names, else some item of the run, holds a unit: `gate_units`): its policy
    runs on none of its items, its rule is no check's of those items, or a turn metric names
    no conversation. `items`: the gate's items (TaskItem)."""
    if gate.items:
        for item in items:
            why = _no_unit(gate, item, single_policies, conversation_policies)
            if why:
                return f"item '{item.id}' holds no unit of it: {why}"
        return ""

    def runs(item) -> list[str]:
        return conversation_policies if item.is_conversation else single_policies

    covered = [item for item in items if gate.policy in runs(item)]
    if not covered:
        kinds = {"conversation" if item.is_conversation else "single-reply" for item in items}
        listed = "conversation_policies" if kinds == {"conversation"} else "policies"
        return (
            f"policy '{gate.policy}' runs on none of its items ({', '.join(sorted(kinds))} "
            f"items run the config's {listed}), so it would judge nothing"
        )
    if gate.metric in CONVERSATION_METRICS and not any(i.is_conversation for i in covered):
        return f"metric '{gate.metric}' is over turns, and none of its items is a conversation"
    if gate.rule is not None:
        known = {name for item in covered for name in rule_names(item.checks)}
        if gate.rule not in known:
            return (
                f"rule '{gate.rule}' is no rule of its items under '{gate.policy}' (they have: "
                f"{', '.join(sorted(known))})"
            )
    return ""
