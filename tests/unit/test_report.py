"""report.html from a synthetic run folder (tests/data/report_run/make_run.py): sections,
verdict numbers, escaping of untrusted run strings, missing files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.script_module import load_script

MAKE_RUN = Path(__file__).parents[1] / "data" / "report_run" / "make_run.py"
FIGURES = {
    "fig-divergence", "fig-alpha", "fig-adherence", "fig-survival", "fig-pareto",
    "fig-correlation", "fig-relay", "fig-bias", "fig-carried", "fig-attention-share",
    "fig-attention-exponent", "fig-laws", "fig-rule-0", "fig-rule-1",
}  # fmt: skip
SECTIONS = ["verdicts", "rules", "divergence", "alpha", "attention", "adherence", "survival",
            "policies", "forks", "laws", "correlation", "samples", "theory",
            "manifest"]  # fmt: skip


def load_make_run():
    return load_script(MAKE_RUN, "report_make_run")


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    """The synthetic run folder, built once per module (tests copy it before changing it)."""
    return load_make_run().build_run(tmp_path_factory.mktemp("report") / "run")


@pytest.fixture(scope="module")
def rendered(synthetic_run) -> str:
    from harness.report import render_report

    path = render_report(synthetic_run)
    assert path == synthetic_run / "report.html"
    return path.read_text(encoding="utf-8")


def figure_data(html: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="figure-data">(.*?)</script>', html, re.S
    )
    assert match, "figure data block missing"
    return json.loads(match.group(1))


def card_texts(html: str) -> dict[str, str]:
    """Card title -> its sentences (HTML unescaped)."""
    import html as html_lib

    cards = re.findall(r'<div class="card[^"]*"><h3>(.*?)</h3>(.*?)</div>', html, re.S)
    return {
        html_lib.unescape(t): html_lib.unescape(re.sub(r"</?p>", " ", body)).strip()
        for t, body in cards
    }


def test_every_section_and_figure_is_present(rendered):
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in rendered
    figs = figure_data(rendered)
    assert set(figs) == FIGURES
    for fig_id, fig in figs.items():
        assert f'id="{fig_id}"' in rendered  # a placeholder for every figure
        assert len(fig["data"]) >= 2, fig_id
    assert "is not in this run folder" not in rendered  # every optional file was present


def test_self_contained_plotly_inlined_once_and_no_network(rendered):
    from harness.report.render import plotly_js

    js = plotly_js()
    assert rendered.count(js[:200]) == 1  # one copy for all figures
    outside = rendered.replace(js, "")
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', outside)
    assert "<link" not in outside and "@import" not in outside and "cdn" not in outside.lower()


def _stored_n(row: dict, base: str) -> str:
    """The n a file stores for `base`'s interval ("" when it stores none), as text."""
    for column in (f"{base}_n", "n"):
        if column in row and not pd.isna(row[column]):
            return str(int(row[column]))
    return ""


def test_verdict_cards_match_the_designed_curves(synthetic_run, rendered):
    cards = card_texts(rendered)
    french = cards["french · smollm2-135m-instruct"]
    # a(t) at window starts: none passes 4/4 in windows 0-2, periodic through window 5, restate
    # never drops; but 4 of 4 has the interval [0.51, 1]: "holds 90 %" rests on a(t)'s
    # interval, so 4 samples cannot tell (the point estimates said "to t = 65", "to t = 185",
    # "to the end")
    assert (
        "Cannot tell whether french holds 90 % with none, periodic-64-user, restate: a(t)'s "
        "interval straddles 90 % from the first window." in french
    )
    # restate passes every window of its 4 samples, but its AUC interval overlaps the others':
    # no winner is named
    summary = pd.read_csv(synthetic_run / "summary.csv")
    row = summary[(summary["item"] == "french") & (summary["policy"] == "restate")].iloc[0]
    assert row["auc_low"] < summary[summary["item"] == "french"]["auc_high"].drop(row.name).max()
    assert "Highest adherence AUC: cannot tell (restate's 1.00" in french
    pirate = cards["pirate · smollm2-135m-instruct"]
    # none starts at 2/4 and falls below 1/4 at window 4 (scoring's half-life, t_start 129).
    assert "with none it starts at 50 % and halves by t = 129" in pirate  # 2/4: [0.15, 0.85]


def test_verdict_numbers_follow_the_stored_csvs(synthetic_run, rendered):
    """Every hold sentence follows a(t)'s stored interval: "holds to t" where the low end stays
    >= 0.9, "below" where the first high end is < 0.9, else "cannot tell"."""
    adherence = pd.read_csv(synthetic_run / "adherence_curve.csv")
    cards = card_texts(rendered)
    for (item, policy), rows in adherence.groupby(["item", "policy"]):
        rows = rows.sort_values("t")
        low, high = rows["a_low"].to_numpy(), rows["a_high"].to_numpy()
        text = cards[f"{item} · smollm2-135m-instruct"]
        if low[0] >= 0.9:
            assert f"with {policy}" in text.split("holds 90 %")[1], (item, policy)
        elif high[0] < 0.9:
            assert f"with {policy}" in text and "from the first window:" in text, (item, policy)
        else:
            unsure = text.split("Cannot tell whether")[1].split(".")[0]
            assert policy in unsure, (item, policy)


def test_a_hold_a_winner_and_a_speed_need_intervals_that_decide():
    """The three deciding sentences of the cards say "cannot tell" on identical policies (AUC
    intervals overlap), a flat curve at 0.93 whose interval straddles 0.9, and a 0.02 gap."""
    import numpy as np

    from harness.report.mechanism_cards import twin_speed
    from harness.report.verdicts import highest_sentence, policy_verdict

    t = np.array([1.0, 33.0, 65.0])
    flat = policy_verdict("none", t, np.full(3, 0.93), bounds=(np.full(3, 0.75), np.ones(3)))
    assert flat.hold_undecided and flat.hold_t is None
    sure = policy_verdict("none", t, np.full(3, 0.98), bounds=(np.full(3, 0.92), np.ones(3)))
    assert sure.hold_t == 65.0 and sure.holds_to_end
    auc = {"auc_low": 0.8, "auc_high": 0.99}
    same = [flat.model_copy(update={"policy": p, "auc": 0.93 + d, **auc}) for p, d in
            (("a", 0), ("b", 0.01))]  # fmt: skip
    assert highest_sentence(same)[0].startswith("Highest adherence AUC: cannot tell")
    apart = [same[0], same[1].model_copy(update={"auc": 0.99, "auc_low": 0.995})]
    assert highest_sentence(apart)[0].startswith("Highest adherence AUC: b (0.99")
    bounds = pd.DataFrame(
        {"model": ["m", "untrained:m"], "low": [0.40, 0.38], "high": [0.60, 0.58]}
    )
    assert twin_speed(bounds).startswith("(cannot tell whether faster or slower")
    assert twin_speed(bounds.assign(low=[0.62, 0.38])) == "faster than"


def test_mechanism_correlation_and_predictor_cards(rendered):
    cards = card_texts(rendered)
    mech = cards["Mechanism: how fast the prompt's trace fades"]
    # trained: summary.csv alpha_mean; twin: mean of the pooled fits (0.2 + 0.22 + 0.25 + 0.25)/4
    assert "α = 0.23 for untrained:smollm2-135m-instruct (fits.csv)" in mech
    assert "forgets the prompt faster than its untrained twin" in mech
    assert (
        "Spearman ρ(alpha_mean, auc) = -0.71 [-0.95, 0.10], permutation p = 0.11"
        in (cards["Does α predict behaviour?"])
    )
    assert "AUROC 0.74 [0.62, 0.85]" in cards["Early warning from divergence"]
    assert "(+0.08)" in cards["Early warning from divergence"]


def test_prompt_or_text_cards_read_the_designed_dependence(synthetic_run, rendered):
    cards = card_texts(rendered)
    french = cards["Prompt or text? french (smollm2-135m-instruct)"]
    assert (
        "none: from t = 128 on, removing the system prompt changes adherence by less than "
        "±0.25 (dependence CI within the band); adherence with it is 70 % → 60 % over those "
        "forks: what the model still does is carried by the text written so far." in french
    )
    assert "restate: at every fork, removing the system prompt changes adherence by less" in french
    pirate = cards["Prompt or text? pirate (smollm2-135m-instruct)"]
    assert (
        "none: from t = 64 on, removing the system prompt changes adherence by less than "
        "±0.25 (dependence CI within the band); adherence with it is 30 % → 0 % over those "
        "forks: the prompt has lost its grip: re-inject it (a reminder policy) before "
        "t = 64." in pirate
    )
    assert (
        "restate: the prompt still changes behaviour at the last fork (t = 192): 90 % with it "
        "vs 50 % without (dependence +0.40 [+0.20, +0.60]" in pirate
    )
    carried = pd.read_csv(synthetic_run / "carried.csv")
    n = _stored_n(carried.iloc[-1], "dependence")
    assert f"[+0.20, +0.60]{f', n = {n}' if n else ''})." in pirate


def test_tables_show_each_interval_with_its_n_and_flag_degenerate_ones(synthetic_run, rendered):
    import html as html_lib

    text = html_lib.unescape(rendered)
    policies = text[text.index('<section id="policies">') : text.index('<section id="forks">')]
    assert "<th>95 % CI</th><th>n</th>" in policies
    for row in pd.read_csv(synthetic_run / "policies.csv").to_dict("records"):
        bounds = f"[{row['delta_low']:.3g}, {row['delta_high']:.3g}]"
        assert f"<td>{bounds}</td><td>{_stored_n(row, 'delta')}</td>" in policies, bounds
    forks = text[text.index("<summary>Every fork (") :]
    assert "<th>dependence</th><th>95 % CI</th><th>n</th>" in forks
    carried = pd.read_csv(synthetic_run / "carried.csv")
    last = carried[(carried["item"] == "pirate") & (carried["policy"] == "restate")].iloc[-1]
    # pirate/restate at t = 192: +0.4 [0.2, 0.6]
    assert f"<td>0.4</td><td>[0.2, 0.6]</td><td>{_stored_n(last, 'dependence')}</td>" in forks
    # french/restate's stored [0, 0] is not shown as if it were certain
    assert "<td>[0, 0] degenerate" in forks and "<td>[0, 0]</td>" not in forks


def test_interval_text_says_when_n_is_too_small_or_the_interval_degenerate():
    from harness.report.verdicts import ci_cell, ci_text

    row = {"auc": 0.9, "auc_low": 0.41, "auc_high": 1.0, "n": 4}
    assert ci_text(row, "auc") == " [0.41, 1.00], n = 4" and ci_cell(row, "auc") == "[0.41, 1]"
    assert ci_text(row, "auc", with_n=False) == " [0.41, 1.00]"
    one = {"auc": 1.0, "auc_low": float("nan"), "auc_high": float("nan"), "n": 1}
    assert ci_text(one, "auc") == " (n = 1: too small for an interval)"
    assert ci_cell(one, "auc") == "n too small"
    flat = {"auc_low": 1.0, "auc_high": 1.0, "n": 4, "method": "percentile bootstrap"}
    assert ci_text(flat, "auc") == (
        " [1.00, 1.00] (degenerate: percentile bootstrap over n = 4; n too small to show spread)"
    )
    assert ci_cell(flat, "auc") == "[1, 1] degenerate (percentile bootstrap)"
    # per-interval units win over the row's n (alpha rests on pairs, AUC on samples)
    assert ci_text({**row, "auc_n": 8}, "auc").endswith("n = 8")
    assert ci_text({"x_low": 0.1, "x_high": 0.2}, "x") == " [0.10, 0.20]"  # no n stored


def test_alpha_card_never_shows_the_cross_condition_value_alone(rendered):
    card = card_texts(rendered)["Does α predict behaviour?"]
    assert "Spearman ρ(alpha_mean, auc) = -0.71" in card
    assert (
        "within items, Spearman ρ(per-sample α, adherence AUC) = +0.45 [+0.12, +0.70] over 24 "
        "samples of 2 items." in card
    )
    assert "Positive: what the theory expects when compliant text carries the instruction" in card


def test_fork_arms_side_by_side_and_escaped(rendered):
    assert "Forks, arm by arm" in rendered
    assert "french · none · smollm2-135m-instruct · sample 0 · fork at t = 64" in rendered
    assert "le chat mange &lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert rendered.count('<td class="arm">the cat eats</td>') == 2  # draws 0 and 1


def test_alpha_by_layer_recovers_the_designed_exponents(synthetic_run):
    from harness.report.derive import alpha_by_layer
    from harness.report.load import load_run

    frame, source = alpha_by_layer(load_run(synthetic_run))
    assert source == "fits.csv, pooled over every pair"
    got = frame.set_index(["model", "layer"])["alpha"]
    make_run = load_make_run()
    for layer, alpha in make_run.ALPHA_TRAINED.items():
        assert got[(make_run.MODEL, layer)] == pytest.approx(alpha, abs=0.03)
    for layer, alpha in make_run.ALPHA_TWIN.items():
        assert got[(make_run.TWIN, layer)] == pytest.approx(alpha, abs=0.03)
    assert (frame["low"] <= frame["alpha"]).all() and (frame["alpha"] <= frame["high"]).all()


def test_run_strings_are_escaped_everywhere(rendered):
    from harness.report.render import plotly_js

    page = rendered.replace(plotly_js(), "")
    # Exactly the report's own three script elements; none from the run.
    assert page.count("<script") == 3
    for raw in ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>',
                "<img src=x onerror=alert(3)>", "</script><script>alert(4)"):  # fmt: skip
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'title="window 0 · t 1–32 · fail · language: &lt;img src=x onerror=alert(3)&gt;"' in page
    block = re.search(r'id="figure-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and ">" not in block  # nothing in the JSON can close the tag


def test_untrusted_item_policy_and_model_names(tmp_path):
    """Hostile names in every place the report prints them: cards, viewer, plots, tables."""
    from harness.report.render import figures_json
    from harness.report.viewer import sample_html, viewer_html

    evil = '"><script>alert(9)</script>'
    record = {"model": evil, "item": evil, "policy": evil, "seed": 1, "sample": 0,
              "segments": [{"kind": "injected", "start": 0, "end": 2, "source": "reminder",
                            "text": evil}, {"kind": "generated", "start": 2, "end": 5,
                                            "text": evil}],
              "prompt_messages": [{"role": evil, "content": evil}], "tokens": {}}  # fmt: skip
    for html in (sample_html(record, []), viewer_html([record], None)):
        assert "<script>" not in html and "&lt;script&gt;alert(9)" in html
    from harness.report.plots import correlation_figure

    summary = pd.DataFrame(
        {"model": [evil], "item": [evil], "policy": [evil], "alpha_mean": [0.5], "auc": [0.7]}
    )
    block = figures_json({"fig": correlation_figure(summary)})
    assert "<" not in block and json.loads(block)["fig"]["data"][0]["name"].startswith("&quot;")
    from harness.report.verdicts import adherence_cards

    curve = pd.DataFrame({"model": evil, "item": evil, "policy": ["none"] * 2, "t": [1, 2],
                          "a": [1.0, 1.0]})  # fmt: skip
    from harness.report.cards import _card_html

    html = _card_html(adherence_cards(curve, {})[0])
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_missing_optional_files_are_reported_per_section(synthetic_run, tmp_path):
    from harness.report import render_report

    run = tmp_path / "partial"
    run.mkdir()
    for name in ("generations.jsonl", "windows.csv"):
        shutil.copy(synthetic_run / name, run / name)
    html = render_report(run).read_text()
    for name in ("divergence.csv", "policies.csv", "relay.csv", "bias.csv", "manifest.json"):
        assert f"{name} is not in this run folder" in html
    figs = figure_data(html)
    assert set(figs) == {"fig-adherence", "fig-survival"}  # derived from windows.csv
    assert "french holds 90 %" in html  # verdicts from the scorer's curves of windows.csv


def test_unusable_file_is_named_and_the_rest_still_renders(synthetic_run, tmp_path):
    from harness.report import render_report

    run = tmp_path / "odd"
    shutil.copytree(synthetic_run, run)
    (run / "report.html").unlink()
    (run / "policies.csv").write_text("a,b\n1,2\n")
    html = render_report(run).read_text()
    assert "policies.csv is not usable: missing column(s)" in html
    assert "fig-pareto" not in figure_data(html)


def test_viewer_marks_failing_windows_and_reminders(rendered):
    # french / none / sample 3 fails from window 3 on: its English words sit in w-fail spans.
    sample = re.search(
        r'<details class="sample" data-item="french" data-policy="none" data-fail="1"( open)?>'
        r"<summary>[^<]*sample 3 .*?</details>",
        rendered,
        re.S,
    )
    assert sample, "french / none / sample 3 missing from the viewer"
    # The first failing sample of each item opens by default (sample 2 for french).
    assert re.search(
        r'data-item="french" data-policy="none" data-fail="1" open><summary>'
        r"[^<]*sample 2 ",
        rendered,
    )
    fails = re.findall(r'<span class="w w-fail"[^>]*>(.*?)</span>', sample.group(0))
    passes = re.findall(r'<span class="w w-pass"[^>]*>(.*?)</span>', sample.group(0))
    assert len(fails) == 5 and len(passes) == 3
    assert all("cat" in f and "chat" not in f for f in fails)
    assert all("chat" in p and "cat " not in p for p in passes)
    assert rendered.count('class="seg-injected"') == 4 * 2 * 3  # 3 reminders x 8 periodic samples
    assert rendered.count('class="seg-restatement"') == 8


def test_char_mapping_snaps_to_word_boundaries():
    from harness.report.viewer import char_of

    text = "aa bb cc dd"  # 4 tokens, one per word
    assert [char_of(text, 10, 14, p) for p in (10, 11, 12, 13, 14)] == [0, 3, 6, 9, 11]
    assert char_of("", 0, 0, 0) == 0


def test_policy_verdict_cases():
    import numpy as np

    from harness.report.verdicts import policy_verdict

    t = np.array([10.0, 20.0, 30.0, 40.0])
    v = policy_verdict("none", t, np.array([1.0, 0.95, 0.8, 0.9]))
    assert v.hold_t == 20.0 and not v.holds_to_end and v.hold_phrase() == "to t = 20 with none"
    v = policy_verdict("p", t, np.array([1.0, 1.0, 1.0, 0.9]), overhead=0.061)
    assert v.holds_to_end and v.hold_phrase() == "to the end (t = 40) with p at +6 % tokens"
    v = policy_verdict("q", t, np.array([0.6, 0.5, 0.2, 0.1]))
    assert v.hold_t is None and v.start_phrase() == "with q it starts at 60 % and halves by t = 30"


def test_degenerate_results_read_as_sentences_not_nan():
    import numpy as np

    from harness.report.mechanism_cards import correlation_card, predictor_card
    from harness.report.verdicts import policy_verdict

    v = policy_verdict("none", np.array([1.0, 17.0]), np.array([0.0, 0.0]))
    assert v.start_phrase() == "with none no window passes (to t = 17)"
    corr = pd.DataFrame([{"x": "alpha_mean", "y": "auc", "n": 8, "spearman": float("nan")}])
    assert "could not be estimated" in correlation_card(corr).sentences[0]
    pred = pd.DataFrame(
        [
            {"model": "m", "features": f, "auroc": float("nan"), "reason": "one class only"}
            for f in ("divergence+log_t", "log_t")
        ]
    )
    assert predictor_card(pred).sentences == ["m: AUROC not estimable (one class only)."]


def _unnamed_lines(fig: dict) -> list[str]:
    """Names of the drawn traces the legend names neither itself nor through a legend group
    that has an entry (a CI band belongs to its line's group)."""
    shown = [t for t in fig["data"] if t.get("showlegend", True) is not False]
    names = {t.get("name") for t in shown}
    groups = {t.get("legendgroup") for t in shown if t.get("legendgroup")}
    return [
        str(t.get("name"))
        for t in fig["data"]
        if t.get("name") not in names and t.get("legendgroup") not in groups
    ]


def test_every_multi_panel_legend_names_every_line(rendered):
    panels = {k: f for k, f in figure_data(rendered).items() if "xaxis2" in f["layout"]}
    assert {"fig-adherence", "fig-survival", "fig-carried", "fig-divergence"} <= set(panels)
    for fig_id, fig in panels.items():
        assert _unnamed_lines(fig) == [], fig_id


def test_a_policy_drawn_only_in_a_later_panel_is_in_the_legend():
    """The conversation item runs under between-turn policies the single replies do not: its
    panel comes later, and its policies must still be named (the legend was the first
    panel's)."""
    from harness.report.carried import carried_figure
    from harness.report.plots import curve_figure

    curve = pd.DataFrame(
        [("m", item, policy, t, 0.5, 0.4, 0.6)
         for item, policies in (("a-single", ["none", "restate"]),
                                ("b-conv", ["none", "periodic-every-2-turns-system"]))
         for policy in policies for t in (1, 2, 3)],
        columns=["model", "item", "policy", "t", "a", "low", "high"],
    )  # fmt: skip
    fig = curve_figure(curve, "a", "a(t)").to_plotly_json()
    legend = [t["name"] for t in fig["data"] if t.get("showlegend", True) is not False]
    assert sorted(legend) == ["none", "periodic-every-2-turns-system", "restate"]
    carried = pd.DataFrame(
        [("m", item, policy, t, 0.9, 0.5, 0.4, 0.1, 0.7, 0.2)
         for item, policy in (("a", "none"), ("b", "none"), ("b", "restate")) for t in (0, 64)],
        columns=["model", "item", "policy", "fork_t", "adherence_with", "adherence_without",
                 "dependence", "dependence_low", "dependence_high", "kl"],
    )  # fmt: skip
    fig = carried_figure(carried).to_plotly_json()
    legend = [t["name"] for t in fig["data"] if t.get("showlegend", True) is not False]
    assert sorted(legend) == sorted(
        f"{p} · {kind}" for p in ("none", "restate")
        for kind in ("with", "without", "dependence", "KL")
    )  # fmt: skip
    assert _unnamed_lines(fig) == []
