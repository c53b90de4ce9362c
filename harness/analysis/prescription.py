"""The prescription: per rule of each item, does it hold under the baseline policy, where it
breaks, and which of the run's policies fixes it at what cost -> `PrescriptionRow`s
(prescription.csv, the report's and the terminal summary's first table).

It reads what the run already decided, never re-deciding it: a rule's gate checks
(gates.csv) where the config has them, else the rule's one-sided AUC bounds (rules.csv, at the
gates' level) against `target` (rules.csv's `below`, the level the report orders rules by).
A policy fixes a rule when the same test passes for it and, where the run measured the
policy's output quality (QUALITY_COLUMNS of summary.csv), its quality holds; the cheapest such
policy (fewest added tokens) is picked. Its gain is the paired AUC difference of the rule
alone (`rule_gains`: policies.csv's comparison on the rule's own windows and replies, the
same samples of the item under both policies; all rules where no windows.csv is there), so a
fix is never credited with another item's or another rule's adherence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from harness.analysis.gate_family import ladder_row, prescription_level
from harness.analysis.policies import compare_policies
from harness.analysis.quality import PERPLEXITY_LIMIT
from harness.results import PrescriptionRow, as_bool
from harness.scoring.survival import samples_to_bound_median
from harness.stats import DEFAULT_LEVEL
from harness.stats.sided import samples_to_decide

ALL_RULES = "all rules"
BASELINE = "none"
# summary.csv columns that say whether a policy keeps the output's quality (issue 53's
# perplexity and degeneration checks): a present False rules the policy out as a fix
QUALITY_COLUMNS = ("quality_holds", "perplexity_holds", "degeneration_holds")
NOT_NEEDED = "not needed"
NO_FIX = "none of the tried policies passes"
NO_OTHER = "no other policy tried"
MAX_SAMPLES = 4096


def _f(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _by(frame: pd.DataFrame | None, keys: Iterable[str]) -> dict[tuple, dict]:
    if frame is None or frame.empty:
        return {}
    keys = list(keys)
    return {tuple(str(r[k]) for k in keys): r for r in frame.to_dict("records")}


def _condition_rows(rules: pd.DataFrame | None, summary: pd.DataFrame | None) -> pd.DataFrame:
    """One row per (model, item, rule, policy) with the columns the judgement reads: rules.csv,
    else summary.csv's all-rules rows (rule = ALL_RULES)."""
    if rules is not None and not rules.empty:
        return rules.assign(rule=rules["rule"].astype(str))
    if summary is None or summary.empty or "auc" not in summary:
        return pd.DataFrame()
    own = summary[summary["auc"].notna()]
    return own.assign(rule=ALL_RULES, sentence="", below=0.8)


def family_rows(conditions: pd.DataFrame, level: float) -> pd.DataFrame:
    """`conditions` with the AUC's one-sided bounds at the table's level (`prescription_level`
    over its rows, from rules.csv's `holm_bounds`) and each row's `tested` level and
    `error_control`; a row without bounds at that level (summary.csv's all-rules rows, an
    older rules.csv) keeps its own, and says its level is per row."""
    alpha, statements = 100 * (1 - level), len(conditions)
    tested = prescription_level(level, statements)
    rows = []
    for row in conditions.to_dict("records"):
        found = ladder_row(row, "auc", tested)
        if found is not None:
            control = (
                f"AUC vs target, Bonferroni over the table's {statements} tests (each at "
                f"{100 * tested:.4g} %): any wrong decided row <= {alpha:.3g} %"
            )
            rows.append(found | {"tested": tested, "error_control": control})
        else:
            control = f"AUC vs target, per row: each decided row wrong <= {alpha:.3g} %"
            rows.append(row | {"tested": level, "error_control": control})
    return pd.DataFrame(rows, columns=[*conditions.columns, "tested", "error_control"])


GATES_CONTROL = "gates: the run's gate family (gates.csv's `family`, the report's gates section)"


def _judge(
    row: dict, gates: list[dict], target: float, level: float, tell: bool = True
) -> tuple[str, str, float]:
    """(holds, basis, samples to tell) of one condition's rule; `level`: the one-sided level
    the AUC's bounds were made at (samples to tell projects at it; tell=False: NaN, not
    projected, for the policies only the fix reads)."""
    if gates:
        verdicts = [str(g["verdict"]) for g in gates]
        basis = ", ".join(f"gates[{int(g['gate'])}]" for g in gates)
        needed = [_f(g.get("samples_needed")) for g in gates if g["verdict"] == "undecided"]
        needed = [x for x in needed if math.isfinite(x)]
        if "fail" in verdicts:
            return "no", basis, math.nan
        if all(v == "pass" for v in verdicts):
            return "yes", basis, math.nan
        return "cannot tell", basis, max(needed) if needed else math.nan
    auc, n = _f(row.get("auc")), _f(row.get("auc_n", row.get("n_samples")))
    low, high = _f(row.get("auc_lcb")), _f(row.get("auc_ucb"))
    if math.isnan(auc):  # nothing decided: say why rather than read it as a verdict
        cut = _f(row.get("cut_off"))
        cut_text = f": {int(cut)} replies cut at the token limit" if cut > 0 else ""
        return "cannot tell", f"no verdict{cut_text}", math.nan
    basis = f"AUC vs {target:g}"
    if low >= target:
        return "yes", basis, math.nan
    if high < target:
        return "no", basis, math.nan
    needed = math.nan
    if tell and math.isfinite(auc) and math.isfinite(n) and n >= 1:
        found = samples_to_decide(auc, int(n), bound=target, level=level, max_n=MAX_SAMPLES)
        needed = math.nan if found is None else float(found)
    return "cannot tell", basis, needed


def _breaks(row: dict, level: float) -> tuple[str, float, float, float, str]:
    """(axis, the median first failing turn or position, its interval, a note): where the
    samples are too few for any distribution-free interval of a median, the interval is NaN
    and the note says so (`cannot bound at n = 4: 6 samples would`), never [1, inf]."""
    for axis, name in (("turn", "first_fail_turn"), ("t", "survival_median")):
        at = _f(row.get(name))
        if math.isnan(at):
            continue
        low, high, n = (_f(row.get(f"{name}_{end}")) for end in ("low", "high", "n"))
        need = samples_to_bound_median(level)
        if math.isfinite(n) and n < need:
            note = f"cannot bound at n = {int(n)}: {need} samples would"
            return axis, at, math.nan, math.nan, note
        return axis, at, low, high, ""
    return "", math.nan, math.nan, math.nan, ""


def _quality_problem(summary_row: dict | None, quality_row: dict | None = None) -> str:
    """Why the policy's quality rules it out as a fix, or "": quality.csv's rule
    (analysis/quality.py, `quality_holds`) where the run measured it, then summary.csv's."""
    if quality_row is not None and as_bool(quality_row.get("quality_holds")) is False:
        ratio = _f(quality_row.get("perplexity_ratio"))
        low = _f(quality_row.get("degeneration_delta_low"))
        why = []
        if ratio > PERPLEXITY_LIMIT:
            why.append(f"perplexity {ratio:.2f}x none's")
        if low > 0:
            why.append(f"degeneration above none's by >= {low:.2f}")
        return f"its quality does not hold ({', '.join(why) or 'quality.csv'})"
    for column in QUALITY_COLUMNS:
        value = (summary_row or {}).get(column)
        if value is not None and not pd.isna(value) and str(value).lower() in ("false", "0", "no"):
            return f"its quality does not hold ({column})"
    return ""


class _Tables:
    """The run's files, indexed once for the per-rule look-ups."""

    def __init__(self, summary, gates, policies, costs: list[dict] | None, quality=None) -> None:
        self.summary = _by(summary, ("model", "item", "policy"))
        self.quality = _by(quality, ("model", "item", "policy"))
        auc = None if policies is None or policies.empty else policies[policies["metric"] == "auc"]
        self.by_rule = auc is not None and "rule" in auc.columns
        keys = ("model", "item", "policy", "rule") if self.by_rule else ("model", "item", "policy")
        self.paired = _by(auc, keys)
        self.costs = {(str(c["model"]), str(c["item"]), str(c["policy"])): _f(c.get("cost_usd"))
                      for c in costs or []}  # fmt: skip
        self.gates: dict[tuple, list[dict]] = {}
        self.single_rule: set[tuple[str, str]] = set()  # (model, item) judged by one rule
        for g in [] if gates is None or gates.empty else gates.to_dict("records"):
            rule = "" if pd.isna(g.get("rule", "")) else str(g.get("rule", ""))
            key = (str(g["model"]), str(g["item"]), str(g["policy"]), rule or ALL_RULES)
            self.gates.setdefault(key, []).append(g)

    def gates_of(self, model: str, item: str, policy: str, rule: str) -> list[dict]:
        """The gates that judge `rule` under `policy`: its own, and for an item with one rule,
        the all-rules gates too (its all-rules AUC is that rule's)."""
        own = self.gates.get((model, item, policy, rule), [])
        if rule == ALL_RULES or (model, item) not in self.single_rule:
            return own
        return own + self.gates.get((model, item, policy, ALL_RULES), [])

    def gain(self, model: str, item: str, policy: str, rule: str) -> dict:
        key = (model, item, policy, rule) if self.by_rule else (model, item, policy)
        return self.paired.get(key) or {}

    def tokens(self, model: str, item: str, policy: str) -> tuple[float, float]:
        s = self.summary.get((model, item, policy)) or {}
        added = _f(s.get("tokens_injected")) + _f(s.get("tokens_restated"))
        return added, _f(s.get("token_overhead"))


def prescribe(
    rules: pd.DataFrame | None,
    summary: pd.DataFrame | None,
    gates: pd.DataFrame | None = None,
    policies: pd.DataFrame | None = None,
    costs: list[dict] | None = None,
    level: float = DEFAULT_LEVEL,
    quality: pd.DataFrame | None = None,
) -> list[PrescriptionRow]:
    """The prescription of a run from its files (any may be None): rules.csv, summary.csv,
    gates.csv, policies.csv, manifest.json's `hosted_conditions` (the USD per condition),
    quality.csv (a policy whose `quality_holds` is False is never the fix)."""
    conditions = _condition_rows(rules, summary)
    if conditions.empty:
        return []
    conditions = family_rows(conditions, level)
    tables = _Tables(summary, gates, policies, costs, quality)
    tables.single_rule = {
        (str(model), str(item))
        for (model, item), rules_of in conditions.groupby(["model", "item"])["rule"]
        if rules_of.nunique() == 1
    }
    out = []
    for (model, item, rule), rows in conditions.groupby(["model", "item", "rule"], sort=True):
        by_policy = {str(r["policy"]): r for r in rows.to_dict("records")}
        out.append(_prescribe_rule(str(model), str(item), str(rule), by_policy, tables, level))
    return out


def _prescribe_rule(
    model: str, item: str, rule: str, by_policy: dict[str, dict], tables: _Tables, level: float
) -> PrescriptionRow:
    baseline = BASELINE if BASELINE in by_policy else sorted(by_policy)[0]
    base = by_policy[baseline]
    target = _f(base.get("below"))
    target = 0.8 if math.isnan(target) else target

    def judged(policy: str, tell: bool = False) -> tuple[str, str, float]:
        gates = tables.gates_of(model, item, policy, rule)
        row = by_policy[policy]
        return _judge(row, gates, target, _f(row.get("tested", level)), tell)

    holds, basis, tell = judged(baseline, tell=True)
    gated = bool(tables.gates_of(model, item, baseline, rule))
    control = GATES_CONTROL if gated else str(base.get("error_control") or "")
    axis, at, low, high, bound_note = _breaks(base, level)
    fix, rejected, chosen = _pick_fix(model, item, baseline, holds, by_policy, tables, judged)
    paired = tables.gain(model, item, chosen, rule) if chosen else None
    tokens, overhead = tables.tokens(model, item, chosen) if chosen else (math.nan, math.nan)
    usd = math.nan
    if chosen:
        usd = tables.costs.get((model, item, chosen), math.nan) - tables.costs.get(
            (model, item, baseline), math.nan
        )
    sentence = base.get("sentence")
    return PrescriptionRow(
        model=model, item=item, rule=rule,
        sentence="" if sentence is None or pd.isna(sentence) else str(sentence),
        baseline=baseline, holds=holds, basis=basis, target=target,
        auc=_f(base.get("auc")), auc_low=_f(base.get("auc_low")),
        auc_high=_f(base.get("auc_high")),
        n=int(_f(base.get("auc_n", base.get("n_samples"))) if not math.isnan(
            _f(base.get("auc_n", base.get("n_samples")))) else 0),
        breaks_axis=axis, breaks=at, breaks_low=low, breaks_high=high, breaks_note=bound_note,
        samples_to_tell=tell, fix=fix,
        fix_delta=_f((paired or {}).get("delta")),
        fix_delta_low=_f((paired or {}).get("delta_low")),
        fix_delta_high=_f((paired or {}).get("delta_high")),
        fix_tokens=tokens, fix_overhead=overhead, fix_usd=usd, rejected="; ".join(rejected),
        error_control=control,
    )  # fmt: skip


def _pick_fix(model, item, baseline, holds, by_policy, tables: _Tables, judged):
    """(fix, why each other policy is not it, the chosen policy or "")."""
    others = [p for p in sorted(by_policy) if p != baseline]
    if holds == "yes":
        return NOT_NEEDED, [], ""
    if not others:
        return NO_OTHER, [], ""
    passing, rejected = [], []
    for policy in others:
        verdict, basis, _ = judged(policy)
        key = (model, item, policy)
        problem = _quality_problem(tables.summary.get(key), tables.quality.get(key))
        if verdict != "yes":
            rejected.append(f"{policy}: {'fails' if verdict == 'no' else 'cannot tell'} ({basis})")
        elif problem:
            rejected.append(f"{policy}: {problem}")
        else:
            tokens, overhead = tables.tokens(model, item, policy)
            cost = tokens if math.isfinite(tokens) else math.inf
            passing.append((cost, overhead if math.isfinite(overhead) else math.inf, policy))
    if not passing:
        return NO_FIX, rejected, ""
    chosen = min(passing)[2]
    rejected += [f"{p}: passes, costs more" for _, _, p in sorted(passing) if p != chosen]
    return chosen, rejected, chosen


def rule_gains(windows: pd.DataFrame | None, level: float = DEFAULT_LEVEL) -> pd.DataFrame | None:
    """policies.csv's paired AUC comparison for each rule alone (a `rule` column added): each
    policy against the baseline on the same samples of the item, over the rule's own windows
    and replies. None without windows.csv's `rule` column."""
    if windows is None or windows.empty or "rule" not in windows.columns:
        return None
    rules = windows["rule"].fillna("").astype(str)
    frames = []
    for rule in sorted(set(rules) - {""}):
        out = compare_policies(windows[rules == rule], None, baseline=BASELINE, level=level)
        frames.append(out[(out["metric"] == "auc") & (out["item"] != "all")].assign(rule=rule))
    if not frames:
        return None
    # a rule no sample has a verdict for adds no row (pandas deprecates empty frames in concat)
    kept = [f for f in frames if not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else frames[0]


def prescription_frame(rows: list[PrescriptionRow]) -> pd.DataFrame:
    """prescription.csv's frame (the columns in order, header-only without rows)."""
    columns = PrescriptionRow.columns()
    return pd.DataFrame([r.model_dump() for r in rows], columns=columns)
