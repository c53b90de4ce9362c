"""Build a small synthetic run folder for the report tests (no model, < 1 s, ~250 KB).

    python tests/data/report_run/make_run.py OUT_DIR

Designed so the verdicts are known in advance: 2 items x 3 policies x 4 samples, 256 generated
tokens in 32-token windows; each sample fails from a fixed window on ("onset"). One generation
(pirate / none / sample 0) holds hostile HTML, and a window reason and a manifest value too.
Every token is one word of the segment text, so window edges map to word boundaries.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.carried import fork_verdict
from harness.results import (
    AdherenceCurveRow,
    AdherenceRow,
    AttentionRow,
    BiasRow,
    CarriedRow,
    CorrelationRow,
    DivergenceRow,
    FitRow,
    LawRow,
    LinkageRow,
    PolicyRow,
    PredictorRow,
    SummaryRow,
    WindowRow,
    result_frame,
)

MODEL = "smollm2-135m-instruct"
TWIN = "untrained:smollm2-135m-instruct"
ITEMS = ("french", "pirate")
POLICIES = ("none", "restate", "periodic-64-user")
SAMPLES = 4
GENERATED = 256
WINDOW = 32
REMINDER = 12  # tokens of one injected reminder (periodic) or the restatement
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']
# First failing window per sample (None = never fails); -> a(t) per condition.
ONSETS = {
    ("french", "none"): [None, None, 5, 3],
    ("french", "restate"): [None, None, None, None],
    ("french", "periodic-64-user"): [None, None, None, 6],
    ("pirate", "none"): [0, 0, 2, 4],
    ("pirate", "restate"): [None, None, None, 1],
    ("pirate", "periodic-64-user"): [None, 7, None, None],
}
GOOD = {
    "french": ["le", "chat", "mange", "une", "pomme", "dans", "la", "cuisine"],
    "pirate": ["arr", "matey"],
}
BAD = ["the", "cat", "eats", "an", "apple", "in", "the", "kitchen"]
LAYERS = 4  # hidden-state indices 0..4
ALPHA_TRAINED = {1: 0.45, 2: 0.6, 3: 0.75, 4: 0.8}
ALPHA_TWIN = {1: 0.2, 2: 0.22, 3: 0.25, 4: 0.25}
# the prompt's attention share decays with these exponents: the trained model's near its alpha
# (forgetting follows dilution), the twin's far above it; the trained sink holds 60 %
SHARE_TRAINED = {layer: a + 0.05 for layer, a in ALPHA_TRAINED.items()}
SHARE_TWIN = {1: 0.9, 2: 0.9, 3: 0.95, 4: 0.95}
PROMPT_LEN = 40


def _segments(policy: str) -> list[tuple[str, str, int]]:
    """(kind, source, n_tokens) in order."""
    if policy == "restate":
        return [("restatement", "restatement", REMINDER), ("generated", "model", GENERATED)]
    if policy.startswith("periodic"):
        out = []
        for k in range(GENERATED // 64):
            if k:
                out.append(("injected", "reminder", REMINDER))
            out.append(("generated", "model", 64))
        return out
    return [("generated", "model", GENERATED)]


def _record(item: str, policy: str, sample: int, onset: int | None) -> tuple[dict, list[dict]]:
    rng = np.random.default_rng(zlib.crc32(f"{item}/{policy}/{sample}".encode()))
    segments, windows, pos, gen = [], [], 0, 0
    for kind, source, n in _segments(policy):
        if kind == "generated":
            words = []
            for g in range(gen, gen + n):
                w = g // WINDOW
                bank = BAD if onset is not None and w >= onset else GOOD[item]
                words.append(bank[g % len(bank)])
            if (item, policy, sample) == ("pirate", "none", 0):
                words[40 : 40 + len(HOSTILE)] = HOSTILE  # inside window 1
            text = " ".join(words)
            for g in range(gen, gen + n):
                if g % WINDOW == 0:
                    windows.append({"window": g // WINDOW, "t_start": pos + (g - gen) + 1})
                if g % WINDOW == WINDOW - 1:
                    windows[-1]["t_end"] = pos + (g - gen) + 1
            gen += n
        else:
            text = (
                "Reminder: answer in French."
                if item == "french"
                else "Reminder: talk like a pirate."
            )
        segments.append(
            {"kind": kind, "start": pos, "end": pos + n, "source": source, "text": text}
        )
        pos += n
    injected = sum(s["end"] - s["start"] for s in segments if s["kind"] == "injected")
    restated = sum(s["end"] - s["start"] for s in segments if s["kind"] == "restatement")
    record = {
        "version": 1, "run_id": "synthetic", "model": MODEL, "task": "demo", "item": item,
        "policy": policy, "seed": 7, "sample": sample,
        "prompt_messages": [
            {"role": "system", "content": f"Always answer as {item}."},
            {"role": "user", "content": "Tell me about your day."},
        ],
        "prompt_ids": list(range(1, 33)),
        "continuation_ids": [int(x) for x in rng.integers(100, 999, size=pos)],
        "segments": segments,
        "text": " ".join(s["text"] for s in segments),
        "finish_reason": "length", "engine": "synthetic", "seconds": 1.0, "rounds": 1,
        "tokens": {"prompt": 32, "generated": GENERATED, "injected": injected,
                   "restated": restated, "processed": 32 + pos},
    }  # fmt: skip
    rows = []
    for w in windows:
        fails = onset is not None and w["window"] >= onset
        reason = "detected en" if fails else ""
        if fails and (item, policy, sample) == ("pirate", "none", 0) and w["window"] == 0:
            reason = "<img src=x onerror=alert(3)>"
        rows.append({
            "run_id": "synthetic", "model": MODEL, "task": "demo", "item": item,
            "policy": policy, "seed": 7, "sample": sample, "window": w["window"],
            "t_start": w["t_start"], "t_end": w["t_end"],
            "t_gen_start": w["window"] * WINDOW + 1, "check": "language", "scope": "window",
            "value": 0.0 if fails else 1.0, "passed": not fails, "reason": reason,
        })  # fmt: skip
    return record, rows


def _adherence_curve(windows: pd.DataFrame) -> pd.DataFrame:
    """adherence_curve.csv: a(t) at each window start, with a Wilson band."""
    g = windows.groupby(["model", "task", "item", "policy", "window"], as_index=False).agg(
        t=("t_start", "min"), a=("passed", "mean"), n=("passed", "size")
    )
    z, n, p = 1.96, g["n"], g["a"]
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    g = g.assign(a_low=(centre - half).clip(0, 1), a_high=(centre + half).clip(0, 1))
    return g.drop(columns="window").assign(method="wilson")


BOOT = "percentile-bootstrap over pairs"


def _write(out: Path, row, frame: pd.DataFrame, float_format: str | None = None) -> None:
    """Through the file's row model, as the stages write: every declared column, checked."""
    result_frame(row, frame).to_csv(out / row.file, index=False, float_format=float_format)


def _divergence() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.unique(np.concatenate([np.arange(1, 17), np.round(np.geomspace(16, 268, 20))]))
    rows = []
    for model, alphas in ((MODEL, ALPHA_TRAINED), (TWIN, ALPHA_TWIN)):
        for item in ITEMS:
            for policy in POLICIES:
                pair = f"{item}/{policy}/0"
                for layer in range(LAYERS + 1):
                    a = alphas.get(layer, 0.0)
                    scale = 0.0 if layer == 0 else 0.8 * np.exp(rng.normal(0, 0.1))
                    rel = scale * t**-a * np.exp(rng.normal(0, 0.03, size=len(t)))
                    for tt, r in zip(t, rel, strict=True):
                        rows.append(
                            (model, item, policy, 0, pair, layer, int(tt), 1, "assistant")
                            + (30 * r, r, r * r / 2, False)
                        )
    cols = DivergenceRow.columns()[:-1]  # t_unit: the default, tokens
    return pd.DataFrame(rows, columns=cols)


def _laws(div: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """laws.csv through the laws stage's own code, from the divergence rows (a pair's curve per
    layer group at its positions) and the windows (a(t) per sample)."""
    from harness.analysis.fits import layer_groups
    from harness.analysis.law_sets import BEHAVIOUR, Unit, frame_units, group_sets
    from harness.analysis.law_table import law_rows
    from harness.scoring.passes import window_passes

    units = []
    for (model, item, policy), rows in div.groupby(["model", "item", "policy"]):
        for name, members in layer_groups(list(range(1, LAYERS + 1))):
            curve = rows[rows["layer"].isin(members)].groupby("t")["rel_l2"].mean()
            units.append(Unit(model, item, policy, False, "rel_l2", name,
                              curve.index.to_numpy(float), curve.to_numpy(float)))  # fmt: skip
    passes = window_passes(windows)
    passes = passes.assign(x=(passes["window"] + 0.5) * WINDOW,
                           y=passes["passed"].astype(float))  # fmt: skip
    units += frame_units(passes, "a_t", "x", "y", BEHAVIOUR, False)
    return pd.DataFrame(law_rows(group_sets(units, 16), draws=200))


def _attention() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    t = np.unique(np.concatenate([np.arange(1, 17), np.round(np.geomspace(16, 268, 20))]))
    uniform = (PROMPT_LEN - 1) / (PROMPT_LEN + t)
    rows = []
    for model, betas, sink in ((MODEL, SHARE_TRAINED, 0.6), (TWIN, SHARE_TWIN, 0.02)):
        for item in ITEMS:
            for policy in POLICIES:
                pair = f"{item}/{policy}/0"
                for layer, beta in betas.items():
                    share = 0.5 * t**-beta * np.exp(rng.normal(0, 0.03, size=len(t)))
                    for i, tt in enumerate(t):
                        rows.append(
                            (model, item, policy, 0, pair, layer, int(tt), 1, "assistant",
                             PROMPT_LEN, share[i], 2 * share[i], sink, 1.3 * sink, uniform[i])
                        )  # fmt: skip
    return pd.DataFrame(rows, columns=AttentionRow.columns()[:-1])


def build_run(out: Path) -> Path:
    """Write the synthetic run folder to `out` and return it."""
    from harness.analysis.relay import solve_relay, write_relay_csv
    from harness.scoring.adherence import adherence_summary, summary_frame

    out.mkdir(parents=True, exist_ok=True)
    records, rows = [], []
    for (item, policy), onsets in ONSETS.items():
        for sample, onset in enumerate(onsets):
            record, window_rows = _record(item, policy, sample, onset)
            records.append(record)
            rows += window_rows
    with (out / "generations.jsonl").open("w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    windows = pd.DataFrame(rows)
    _write(out, WindowRow, windows)
    adh = summary_frame(adherence_summary(windows))
    _write(out, AdherenceRow, adh, "%.4g")
    _write(out, AdherenceCurveRow, _adherence_curve(windows), "%.4g")
    from harness.analysis.rules import rule_frames  # each rule alone, as the analyse stage

    rules = rule_frames(windows)
    rules["rules.csv"].to_csv(out / "rules.csv", index=False, float_format="%.4g")
    rules["rule_curves.csv"].to_csv(out / "rule_curves.csv", index=False, float_format="%.4g")
    _write(out, DivergenceRow, _divergence(), "%.4g")
    _write(out, LawRow, _laws(_divergence(), windows), "%.4g")
    _write(out, AttentionRow, _attention(), "%.4g")

    summary = []
    for r in adh.itertuples(index=False):
        recs = [x for x in records if (x["item"], x["policy"]) == (r.item, r.policy)]
        gen = sum(x["tokens"]["generated"] for x in recs)
        inj = sum(x["tokens"]["injected"] for x in recs)
        res = sum(x["tokens"]["restated"] for x in recs)
        alpha = 0.65 - 0.1 * r.auc
        intervals = {
            c: getattr(r, c) for c in SummaryRow.columns() if c in AdherenceRow.model_fields
        }
        summary.append({
            **intervals,
            "n": r.n_samples,
            "model": MODEL, "item": r.item, "policy": r.policy, "alpha_mean": alpha,
            "alpha_mean_low": alpha - 0.05, "alpha_mean_high": alpha + 0.05,
            "alpha_mean_n": 2, "alpha_mean_method": "bootstrap over 2 pairs (curve noise)",
            "survival_censored_share": r.censored / (r.censored + r.failures),
            "tokens_generated": gen,
            "tokens_injected": inj, "tokens_restated": res, "token_overhead": (inj + res) / gen,
        })  # fmt: skip
    summary = pd.DataFrame(summary)
    _write(out, SummaryRow, summary, "%.4g")

    fits = [
        (m, item, policy, "all", layer, "rel_l2", a, a - 0.05, a + 0.05, 4, BOOT, 0.98, 16, 256, "")
        for m, alphas in ((MODEL, ALPHA_TRAINED), (TWIN, ALPHA_TWIN))
        for item in ITEMS for policy in POLICIES for layer, a in alphas.items()
    ] + [  # the per-model pooled rows the report reads
        (m, "all", "all", "all", layer, "rel_l2", a, a - 0.05, a + 0.05, 8, BOOT, 0.98, 16, 256, "")
        for m, alphas in ((MODEL, ALPHA_TRAINED), (TWIN, ALPHA_TWIN)) for layer, a in alphas.items()
    ] + [  # the attention share's exponents, pooled per model
        (m, "all", "all", "all", layer, "share_prompt_mean", b, b - 0.05, b + 0.05, 8, BOOT, 0.98,
         16, 256, "")
        for m, betas in ((MODEL, SHARE_TRAINED), (TWIN, SHARE_TWIN)) for layer, b in betas.items()
    ]  # fmt: skip
    _write(out, FitRow, pd.DataFrame(fits, columns=FitRow.columns()[:-1]))
    _write(out, CorrelationRow, pd.DataFrame([{
        "x": "alpha_mean", "y": "auc", "n": 6, "spearman": -0.71, "spearman_low": -0.95,
        "spearman_high": 0.1, "spearman_method": "fisher-z (bonett-wright)", "pearson": -0.68,
        "pearson_low": -0.93, "pearson_high": 0.2, "pearson_method": "fisher-z", "perm_p": 0.11,
        "perm_p_holm": 0.11,
    }]))  # fmt: skip
    _write(out, PredictorRow, pd.DataFrame([
        (MODEL, "divergence+log_t", 0.74, 0.62, 0.85, BOOT, 192, 24, 40, 4, ""),
        (MODEL, "log_t", 0.66, 0.55, 0.77, BOOT, 192, 24, 40, 4, ""),
    ], columns=PredictorRow.columns()))  # fmt: skip

    pol = []
    for item, rows_ in summary.groupby("item"):
        none = rows_[rows_["policy"] == "none"].iloc[0]
        best = -1.0
        for r in rows_.sort_values("token_overhead").itertuples(index=False):
            pareto = r.auc > best
            best = max(best, r.auc)
            delta = r.auc - none["auc"]
            pol.append((MODEL, item, r.policy, "auc", r.auc, none["auc"], delta, delta - 0.1,
                        delta + 0.1, SAMPLES, "betting", r.token_overhead, pareto,
                        float("nan"), float("nan"), None))  # fmt: skip
    _write(out, PolicyRow, pd.DataFrame(pol, columns=PolicyRow.columns()))

    write_relay_csv(solve_relay(32, 3, 10_000), out / "relay.csv")
    bias = []
    for m, base, slope in ((MODEL, ALPHA_TRAINED, 0.9), (TWIN, ALPHA_TWIN, 0.15)):
        for lam in (0.0, 0.25, 0.5, 1.0):
            for layer, a in base.items():
                v = a - slope * lam
                share = a * (1 - lam)  # lam = 1 holds the share: exponent 0
                end = 0.3 * (16 / 268) ** share
                bias.append((m, lam, layer, v, v - 0.04, v + 0.04, 0.97, 2, "",
                             share, share - 0.05, share + 0.05, 0.3, end))  # fmt: skip
    _write(out, BiasRow, pd.DataFrame(bias, columns=BiasRow.columns()))
    manifest = {
        "run_id": "synthetic", "name": "report-test",
        "config": {"note": "</script><script>alert(4)</script>", "samples": SAMPLES},
        "versions": {"harness": "0.1.0", "torch": "2.13.0"},
        "models": {MODEL: {"path": "/models/smollm2", "content_key": "abc123"},
                   TWIN: {"path": "(built)", "content_key": "def456"}},
        "seeds": [7], "timings": {"generate": 12.5, "score": 1.25, "probe": 30.0},
        "started": "2025-01-01T00:00:00Z", "finished": "2025-01-01T00:01:00Z",
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _forks(out)
    return out


# carried.csv per (item, policy): with, without, (dependence_low, dependence_high) at FORK_AT
FORK_AT = (0, 64, 128, 192)
CARRIED = {
    # the prompt matters at first, then the French text carries it (settles at 128, 70 -> 60 %)
    ("french", "none"): ([0.9, 0.8, 0.7, 0.6], [0.1, 0.5, 0.7, 0.6],
                         [(0.6, 1.0), (0.1, 0.5), (-0.2, 0.2), (-0.2, 0.2)]),
    ("french", "restate"): ([1, 1, 1, 1], [0.9, 1, 1, 1],
                            [(-0.1, 0.2), (0, 0), (0, 0), (0, 0)]),
    # settles at 64 with the behaviour already gone: the prompt lost its grip
    ("pirate", "none"): ([0.8, 0.3, 0.1, 0.0], [0.2, 0.2, 0.1, 0.0],
                         [(0.3, 0.9), (-0.1, 0.2), (-0.1, 0.1), (0, 0)]),
    # still depends on the prompt at the last fork
    ("pirate", "restate"): ([1, 1, 0.9, 0.9], [0.2, 0.3, 0.4, 0.5],
                            [(0.6, 1.0), (0.5, 0.9), (0.3, 0.7), (0.2, 0.6)]),
}  # fmt: skip


def _forks(out: Path) -> None:
    rows = []
    for (item, policy), (with_, without, cis) in CARRIED.items():
        for i, t in enumerate(FORK_AT):
            rows.append({
                "model": MODEL, "item": item, "policy": policy, "fork_t": t, "records": 2,
                "draws": 4, "adherence_with": with_[i], "adherence_without": without[i],
                "dependence": with_[i] - without[i], "dependence_low": cis[i][0],
                "dependence_high": cis[i][1], "n": 2, "method": "betting",
                "verdict": fork_verdict(*cis[i]),
                "kl": 0.3 / (1 + t), "abs_delta_logp": 0.1,
                "reason": "",
            })  # fmt: skip
    _write(out, CarriedRow, pd.DataFrame(rows))
    nan = float("nan")
    _write(out, LinkageRow, pd.DataFrame([
        ("alpha_auc_item", MODEL, "french", "alpha", "auc", 12, 1, 0.55, nan, nan, "none (x)"),
        ("alpha_auc_item", MODEL, "pirate", "alpha", "auc", 12, 1, 0.35, nan, nan, "none (x)"),
        ("alpha_auc_within", MODEL, "", "alpha", "auc", 24, 2, 0.45, 0.12, 0.7, "fisher-z"),
        ("alpha_auc_across", "", "", "alpha_mean", "auc", 6, nan, -0.71, -0.95, 0.1, "fisher-z"),
        ("kl_dependence_item", MODEL, "french", "kl", "dependence", 8, 1, 0.8, nan, nan, "x"),
    ], columns=LinkageRow.columns()))  # fmt: skip
    arms = [
        {"model": MODEL, "item": "french", "policy": "none", "sample": 0, "fork_t": 64,
         "arm": arm, "draw": draw, "seed": 1, "prompt_tokens": 80, "token_ids": [1, 2],
         "text": text, "finish_reason": "length"}
        for draw in (0, 1)
        for arm, text in (("with", f"le chat mange {HOSTILE[0]}"), ("without", "the cat eats"))
    ]  # fmt: skip
    (out / "forks.jsonl").write_text("".join(json.dumps(a) + "\n" for a in arms))


if __name__ == "__main__":
    print(build_run(Path(sys.argv[1])))
