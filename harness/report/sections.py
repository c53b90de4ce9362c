"""The report's sections. Each takes the loaded run and returns (html, {figure id: figure}); a
section whose input file is missing says so in one sentence instead of failing."""

from __future__ import annotations

import json
import math
import re

from harness.analysis.quality import PERPLEXITY_LIMIT
from harness.report import derive, plots, theory
from harness.report.attention import attention_section
from harness.report.calibration import calibration_section
from harness.report.cards import verdicts
from harness.report.carried import forks_section, linkage_sentences
from harness.report.conversations import conversations_section
from harness.report.gates import gates_section
from harness.report.html import esc, figure, fold, note, section, table
from harness.report.instrument import corrected_auc_part, undecided_windows_note
from harness.report.laws import laws_section
from harness.report.load import RunData
from harness.report.logs import logs_part
from harness.report.prescription import prescription_section
from harness.report.rules import rules_section
from harness.report.verdicts import ci_cell, n_cell
from harness.report.viewer import viewer_html
from harness.results import as_bool

TITLES = {
    "prescription": "What breaks and what fixes it",
    "gates": "Gates",
    "verdicts": "Verdicts",
    "rules": "Which rule breaks first",
    "divergence": "Divergence decay",
    "alpha": "α by layer",
    "attention": "Where the prompt's attention goes",
    "adherence": "Adherence a(t)",
    "survival": "Survival",
    "conversations": "Conversations",
    "logs": "Logged conversations",
    "policies": "Policies",
    "forks": "Prompt or text?",
    "laws": "Does the prompt's grip vanish or settle?",
    "correlation": "α vs behaviour",
    "judge": "How far to trust the judge",
    "samples": "Samples",
    "theory": "Theory",
    "manifest": "Manifest",
}


def divergence(data: RunData) -> tuple[str, dict]:
    div = data.frame("divergence.csv")
    if derive.endpoint_only(data):
        return note(derive.ENDPOINT_ONLY), {}
    if div is None:
        return note(data.missing("divergence.csv")), {}
    lengths = {m: derive.prompt_length(data, m) for m in div["model"].unique()}
    fig = plots.divergence_figure(div, lengths)
    caption = (
        "Mean relative distance rel_l2 between the two prompts' hidden states, averaged over "
        "the layers of each group and over pairs, on log-log axes: a straight line is a power "
        "law t^-α (dotted: the fit over t >= 16, α in the legend). Grey dashed: 1/t and the "
        "bound P (log t)^(L-1)/t, each scaled to the late group; a curve steeper than them "
        "forgets faster than the theory allows."
    )
    if "below_floor" in div and div["below_floor"].any():  # a probe below float32
        caption += (
            f" {int(div['below_floor'].sum())} of {len(div)} rows lie within 3x the rounding "
            "floor measured for the probe's reduced dtype (divergence.csv below_floor): shown "
            "as stored, left out of every fit and law."
        )
    return figure("fig-divergence", caption, 460), {"fig-divergence": fig}


def alpha(data: RunData) -> tuple[str, dict]:
    frame, source = derive.alpha_by_layer(data)
    if frame is None or not len(frame):
        return note(data.missing("fits.csv")), {}
    caption = (
        f"Decay exponent α of rel_l2 per hidden-state index with 95 % bootstrap CIs (from "
        f"{source}); solid: trained, dashed: untrained twin. Higher α = the prompt's trace "
        "fades faster at that depth."
    )
    return figure("fig-alpha", caption, 400), {"fig-alpha": plots.alpha_by_layer_figure(frame)}


def adherence(data: RunData) -> tuple[str, dict]:
    curve, source = derive.adherence_curve(data)
    if curve is None or not len(curve):
        return note(data.missing("adherence.csv") + " " + data.missing("windows.csv")), {}
    caption = (
        f"a(t) of all rules: share of samples whose window covering t keeps every rule (its "
        "window checks and its reply's whole-reply checks), per policy, with "
        f"its 95 % CI band over samples (from {source}). A policy that keeps its line high "
        "for longer keeps the system prompt steering for longer."
    )
    fig = plots.curve_figure(curve, "a", "a(t)")
    stored = data.frame("adherence.csv")
    checks = undecided_windows_note(stored) + corrected_auc_part(stored)
    return figure("fig-adherence", caption, fig.layout.height) + checks, {"fig-adherence": fig}


def survival(data: RunData) -> tuple[str, dict]:
    surv, source = derive.survival_curve(data)
    if surv is None or not len(surv):
        return note(data.missing("windows.csv")), {}
    caption = (
        f"Kaplan-Meier survival (from {source}): share of samples with no failing window yet "
        "at t; samples that never fail are censored at their last window. A step down is a "
        "sample's first violation."
    )
    fig = plots.curve_figure(surv, "survival", "S(t)", step=True)
    # a(t) above carries the headline; the time to a first failure is its companion
    html = fold("S(t) per item and policy", figure("fig-survival", caption, fig.layout.height))
    return html, {"fig-survival": fig}


def _quality_cells(row: dict) -> list[str]:
    """policies.csv's quality beside the gain (issue 53): the perplexity ratio and the rule's
    verdict, blank where the run did not measure them."""
    ratio = row.get("perplexity_ratio")
    holds = as_bool(row.get("quality_holds"))
    ratio_text = f"{ratio:.2f}x" if isinstance(ratio, float) and math.isfinite(ratio) else ""
    return [ratio_text, "" if holds is None else ("yes" if holds else "no")]


def policies(data: RunData) -> tuple[str, dict]:
    frame = data.frame("policies.csv")
    if frame is None:
        return note(data.missing("policies.csv")), {}
    caption = (
        "Each policy's adherence AUC gain over none against its token overhead, both "
        "policies on the same items and samples (paired), with the paired 95 % interval; "
        "stars and the dotted line are the Pareto frontier (no other policy gains more for "
        "fewer tokens). Up and left is better; on the dashed line a policy changes nothing. "
        "Beside each gain, its quality (quality.csv): the perplexity of the policy's replies "
        "under the unsteered model against none's, and whether the quality rule holds "
        f"(perplexity within {PERPLEXITY_LIMIT:g}x, no more repetition than none's; "
        "docs/remedies.md)."
    )
    rows = [
        [
            r["model"], r["item"], r["policy"], r["metric"], r["value"], r.get("none_value"),
            r.get("delta"), ci_cell(r, "delta"), n_cell(r, "delta"),
            f"{100 * r['token_overhead']:.1f} %" if "token_overhead" in r else "",
            str(r.get("pareto", "")), *_quality_cells(r),
        ]
        for r in frame.to_dict("records")
    ]  # fmt: skip
    headers = ["model", "item", "policy", "metric", "value", "none", "delta", "95 % CI", "n",
               "overhead", "pareto", "perplexity vs none", "quality holds"]  # fmt: skip
    fig = plots.pareto_figure(frame) if "token_overhead" in frame.columns else None
    html = (figure("fig-pareto", caption) if fig else "") + fold(
        f"Every comparison ({len(rows)} rows of policies.csv)", table(headers, rows)
    )
    return html, ({"fig-pareto": fig} if fig else {})


def correlation(data: RunData) -> tuple[str, dict]:
    html, figs = [], {}
    summary = data.frame("summary.csv")
    if (
        summary is not None
        and {"alpha_mean", "auc"} <= set(summary.columns)
        and (summary["alpha_mean"].notna() & summary["auc"].notna()).any()
    ):
        figs["fig-correlation"] = plots.correlation_figure(summary)
        html.append(
            figure(
                "fig-correlation",
                "One point per condition (model, item, policy): mean α over layers against "
                "adherence AUC, with 95 % CIs. A falling cloud means conditions whose prompt "
                "trace fades faster also lose the behaviour sooner.",
            )
        )
    else:
        html.append(note(data.missing("summary.csv")))
    corr = _formed(data.frame("correlation.csv"), "spearman")
    if corr is not None:
        headers = [c for c in corr.columns]
        html.append(fold("Across conditions (correlation.csv)",
                         table(headers, corr.itertuples(index=False))))  # fmt: skip
    else:
        html.append(note(_why_not(data, "correlation.csv")))
    link = _formed(data.frame("linkage.csv"), "spearman")
    if link is not None:
        reading = "".join(f"<p>{esc(s)}</p>" for s in linkage_sentences(link))
        html.append(fold(
            "Within items (linkage.csv)",
            note(
                "A cross-condition coefficient mixes items, which differ in both α and "
                "adherence for reasons of their own. Here each probed sample's own α against "
                "its own adherence AUC, within each item (alpha_auc_item), their mean over "
                "items (alpha_auc_within), and per item the next-token KL at a fork against "
                "the behavioural dependence there (kl_dependence_item)."
            )
            + reading
            + table(list(link.columns), link.itertuples(index=False)),
        ))  # fmt: skip
    else:
        html.append(note(_why_not(data, "linkage.csv")))
    pred = _formed(data.frame("predictor.csv"), "auroc")
    if pred is not None:
        html.append(fold(
            "Early warning (AUROC, predictor.csv)",
            note(
                "Cross-validated AUROC of a logistic regression predicting a failing window "
                "from divergence features and log t, against log t alone (grouped by sample)."
            )
            + table(list(pred.columns), pred.itertuples(index=False)),
        ))  # fmt: skip
    else:
        html.append(note(_why_not(data, "predictor.csv")))
    return "".join(html), figs


def _formed(frame, column: str):
    """The file's frame where some coefficient could be formed, else None (a run without a
    probe writes rows of n = 0 and no coefficient)."""
    if frame is None or column not in frame.columns or frame[column].isna().all():
        return None
    return frame


def _why_not(data: RunData, name: str) -> str:
    if data.frame(name) is not None:
        return f"{name} has no coefficient: too few units (a run without a probe has no α)."
    return data.missing(name)


def judge(data: RunData) -> tuple[str, dict]:
    return calibration_section(data), {}


def samples(data: RunData) -> tuple[str, dict]:
    if not data.generations:
        return note(data.missing("generations.jsonl")), {}
    legend = note(
        "Text by segment: reminders injected by a policy and restatements are boxed; each "
        "generated window is tinted green (passes), red (fails) or grey (undetermined); hover "
        "for the window's range and reasons. Window edges are placed in proportion to token "
        "offsets within a segment (no tokenizer at report time), so they can be off by a word."
    )
    return legend + viewer_html(data.generations, data.frame("windows.csv")), {}


def theory_part(data: RunData) -> tuple[str, dict]:
    return theory.theory_section(data.frame("relay.csv"), data.frame("bias.csv"), data.missing)


def manifest(data: RunData) -> tuple[str, dict]:
    m = data.manifest
    if m is None:
        return note(data.missing("manifest.json")), {}
    html = [table(["field", "value"], [[k, m.get(k, "")] for k in ("run_id", "name", "started",
                                                                    "finished")])]  # fmt: skip
    if isinstance(m.get("models"), dict):
        rows = [
            [name, (v or {}).get("path", ""), (v or {}).get("content_key", "")]
            if isinstance(v, dict) else [name, str(v), ""]
            for name, v in m["models"].items()
        ]  # fmt: skip
        html.append("<h3>Models</h3>" + table(["model", "path", "content key"], rows))
    if isinstance(m.get("timings"), dict):
        rows = [[k, _seconds(v)] for k, v in m["timings"].items()]
        html.append("<h3>Timings</h3>" + table(["stage", "seconds"], rows))
    if "seeds" in m:
        html.append(f"<h3>Seeds</h3><pre>{esc(json.dumps(m['seeds']))}</pre>")
    if isinstance(m.get("versions"), dict):
        html.append("<h3>Versions</h3>" + table(["package", "version"], m["versions"].items()))
    if "config" in m:
        config = esc(json.dumps(m["config"], indent=2, ensure_ascii=False))
        html.append(f"<details><summary>Resolved config</summary><pre>{config}</pre></details>")
    return fold("Run id, models, timings, seeds, versions and the resolved config",
                "".join(html)), {}  # fmt: skip


def _seconds(v) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if math.isnan(x) else f"{x:,.2f}"


BUILDERS = {
    "prescription": prescription_section,
    "gates": gates_section,
    "verdicts": verdicts,
    "rules": rules_section,
    "divergence": divergence,
    "alpha": alpha,
    "attention": attention_section,
    "adherence": adherence,
    "survival": survival,
    "conversations": conversations_section,
    "logs": logs_part,
    "policies": policies,
    "forks": forks_section,
    "laws": laws_section,
    "correlation": correlation,
    "judge": judge,
    "samples": samples,
    "theory": theory_part,
    "manifest": manifest,
}


# a body of nothing but notes under headings: its sentences say only why it has nothing to show
_NOTES = re.compile(r'<p class="note">[^<]*</p>|<h[34]>[^<]*</h[34]>')


def has_data(body: str) -> bool:
    """Whether a section's body shows data: anything beyond notes on why it has none."""
    return bool(_NOTES.sub("", body).strip())


def left_out_line(left_out: list[tuple[str, str]]) -> str:
    """One line naming the sections left out for want of data, each one's reason folded."""
    names = ", ".join(esc(TITLES[a]) for a, _ in left_out)
    reasons = "".join(f"<li><b>{esc(TITLES[a])}</b>: {body}</li>" for a, body in left_out)
    return (
        f'<div class="left-out note">Left out, no data in this run: {names}. '
        f"<details><summary>why</summary><ul>{reasons}</ul></details></div>"
    )


def build_sections(data: RunData) -> tuple[list[str], dict, list[str]]:
    """The sections that have data in page order (the prescription first), then one line
    naming those left out; every figure keyed by its div id, and the anchors shown (a builder
    that returns None, e.g. Conversations in a single-reply run, is left out silently)."""
    html, figs, anchors, left_out = [], {}, [], []
    for anchor, build in BUILDERS.items():
        built = build(data)
        if built is None:
            continue
        body, section_figs = built
        if not section_figs and not has_data(body):
            left_out.append((anchor, body))
            continue
        html.append(section(anchor, TITLES[anchor], body))
        figs.update(section_figs)
        anchors.append(anchor)
    if left_out:
        html.insert(1 if anchors[:1] == ["prescription"] else 0, left_out_line(left_out))
    return html, figs, anchors
