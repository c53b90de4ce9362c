"""Analysis stage: adherence curves, per-condition summary, alpha <-> behaviour, the
divergence-based violation predictor, the policy comparison and the judge's agreement with
code checks, from the earlier outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.analysis.calibration import judge_calibration, measured_judges
from harness.analysis.carried import carried_frame, record_points
from harness.analysis.conversations import conversation_summary, turn_curves
from harness.analysis.correlation import correlate_alpha_behaviour
from harness.analysis.linkage import linkage_frame
from harness.analysis.policies import compare_policies, with_quality
from harness.analysis.predictor import predict_violations, window_features
from harness.analysis.quality import quality_frame
from harness.analysis.rules import rule_frames, rule_sentences
from harness.analysis.summary import default_layers, summarise_conditions, token_frame
from harness.config.gate_specs import gate_levels
from harness.results import (
    AdherenceCurveRow,
    AdherenceRow,
    CalibrationRow,
    CarriedRow,
    ConversationRow,
    CorrelationRow,
    DivergenceRow,
    FitRow,
    ForkRow,
    LinkageRow,
    NextTokenRow,
    PolicyRow,
    PredictorRow,
    QualityRow,
    RuleCurveRow,
    RuleRow,
    SummaryRow,
    SurvivalRow,
    TurnAdherenceRow,
    TurnRow,
    WindowRow,
)
from harness.scoring.io import adherence_frames, load_tokenizer
from harness.scoring.measured import measured_checks
from harness.scoring.score import item_checks
from harness.stages.base import Records
from harness.stages.context import RunContext
from harness.stages.forks import forked_records

if TYPE_CHECKING:  # annotations only: pandas loads where frames are made
    import pandas as pd

FULL_READS = (Records, WindowRow, TurnRow, FitRow, DivergenceRow, NextTokenRow, ForkRow)
FULL_WRITES = (
    AdherenceRow, AdherenceCurveRow, SurvivalRow, SummaryRow, CorrelationRow, PredictorRow,
    PolicyRow, QualityRow, CalibrationRow, CarriedRow, LinkageRow, TurnAdherenceRow,
    ConversationRow, RuleRow, RuleCurveRow,
)  # fmt: skip


class AnalyseStage:
    """windows.csv, fits.csv, divergence.csv, nexttoken.csv and the records' token counts ->
    adherence.csv, adherence_curve.csv, survival.csv, summary.csv, correlation.csv,
    predictor.csv, policies.csv, quality.csv, calibration.csv, linkage.csv, rules.csv and
    rule_curves.csv (each rule alone); carried.csv from forks.csv when the run forks; with
    conversations (turns.csv), turn_adherence.csv and conversations.csv."""

    name = "analyse"

    def __init__(self, summary_only: bool = False) -> None:
        # a sequential run's looks need summary.csv alone (the gates read it), from the
        # records and windows (no probe runs between looks); the other files come once, from
        # the final records
        self.summary_only = summary_only
        self.reads = (Records, WindowRow) if summary_only else FULL_READS
        self.writes = (SummaryRow,) if summary_only else FULL_WRITES

    def run(self, ctx: RunContext) -> dict[str, object]:
        import pandas as pd

        bar = ctx.progress.bar("analyse", 1)
        st = ctx.config.stats  # one level and number of draws for every interval
        windows = ctx.frame(WindowRow)
        fits = pd.DataFrame() if self.summary_only else ctx.frame(FitRow)
        tokens = token_frame(ctx.records())
        layers = default_layers(fits) if not fits.empty else []
        # a sequential run looks at its gates after every batch: anytime-valid intervals
        anytime = st.anytime or ctx.config.sequential is not None
        # the fixed t-range of per-sample AUC and final: the budget, known before the data
        horizon = ctx.config.generation.max_tokens
        # the checks' measured error (labelled sets; a judge against the code checks) for the
        # corrected estimates (harness.scoring.corrected)
        calibration = judge_calibration(windows, level=st.level, draws=st.draws)
        rates = {**self.measured(ctx), **measured_judges(calibration)}
        items = [sel.item.id for sel in ctx.items]  # the gates' checks, for their level
        checked = gate_levels(ctx.config.gates, list(ctx.config.models), items, st.level, st.family)
        summary = summarise_conditions(
            fits if not fits.empty else None, windows, tokens, layers,
            level=st.level, anytime=anytime, horizon=horizon, rates=rates, gate_level=checked,
        )  # fmt: skip
        if self.summary_only:
            bar.finish()
            return {"summary.csv": summary}
        out: dict[str, Any] = {
            **adherence_frames(
                windows,
                level=st.level,
                anytime=anytime,
                horizon=horizon,
                rates=rates,
                gate_level=checked,
            ),  # fmt: skip
            "summary.csv": summary,
        }
        out["correlation.csv"] = correlate_alpha_behaviour(summary, level=st.level)
        divergence, nexttoken = ctx.frame(DivergenceRow), ctx.frame(NextTokenRow)
        features = window_features(windows, divergence, nexttoken, layers)
        out["predictor.csv"] = predict_violations(features, n_boot=st.draws, ci=st.level)
        out["quality.csv"] = quality_frame(ctx.records(), windows, level=st.level)
        out["policies.csv"] = with_quality(
            compare_policies(windows, tokens, level=st.level, horizon=horizon), out["quality.csv"]
        )
        out["calibration.csv"] = calibration
        carried = carried_of(ctx, nexttoken)
        if carried is not None:
            out["carried.csv"] = carried
        # each forked record's own kl and dependence: the record is the unit of their link
        points = (
            record_points(ctx.frame(ForkRow), nexttoken) if carried is not None else pd.DataFrame()
        )
        out["linkage.csv"] = linkage_frame(
            fits, windows, out["correlation.csv"], points, level=st.level
        )
        turns = ctx.frame(TurnRow)
        if not turns.empty:  # conversations: adherence by turn, pressure effect
            out["turn_adherence.csv"] = turn_curves(turns, level=st.level, rates=rates)
            out["conversations.csv"] = conversation_summary(turns, tokens, level=st.level)
        # each rule alone (the headline above is all rules)
        sentences = rule_sentences(
            (sel.item.id, c)
            for sel in ctx.items
            for c in item_checks(sel.item, ctx.config.scoring.languages)
        )
        out.update(
            rule_frames(
                windows, turns, sentences=sentences, level=st.level, anytime=anytime,
                horizon=horizon, gate_level=checked,
            )
        )  # fmt: skip
        bar.finish()
        return out

    def measured(self, ctx: RunContext) -> dict[str, Any]:
        """The run's checks measured on the labelled sets (harness.scoring.measured), once per
        run: kept on the run's context, not on this stage (one instance serves every run of
        the process; a second run would read the first one's rates)."""
        if ctx.measured_rates is None:
            scoring = ctx.config.scoring
            checks = [c for sel in ctx.items for c in item_checks(sel.item, scoring.languages)]
            tokenizer = lambda: load_tokenizer(ctx.models[0].name)  # noqa: E731
            ctx.measured_rates = measured_checks(
                checks, scoring.languages, scoring.validation, tokenizer
            )
        rates: dict[str, Any] = ctx.measured_rates
        return rates


def carried_of(ctx: RunContext, nexttoken: pd.DataFrame) -> pd.DataFrame | None:
    """carried.csv of a forking run (None when the run has no forks)."""

    forks = ctx.config.forks
    if forks is None:
        return None
    records = forked_records(forks, ctx.records())
    lengths = {(r.model, r.item, r.policy, r.sample): len(r.continuation_ids) for r in records}
    level = ctx.config.stats.level
    frame = ctx.frame(ForkRow)
    # forks at turn starts: each record's own positions (not pooled across records per turn)
    at = forks.at if forks.at is not None else sorted({int(t) for t in frame.get("fork_t", [])})
    return carried_frame(frame, lengths, list(at), nexttoken, level=level)
