"""The Conversations section's replay part: per turn, the logged replies against the model's
replies given the logged history (`reference`) and given its own (`own`), adherence with
intervals from turn_adherence.csv, and a few replies side by side (docs/architecture.md,
"Replay"). Every text comes from the run (logs, model output) and is escaped by `table`."""

from __future__ import annotations

import pandas as pd

from harness.report.html import esc, fmt_num, note, table
from harness.stats.text import interval_text

HISTORIES = ("logged", "reference", "own")
EXAMPLE_CONVERSATIONS = 3  # conversations shown reply by reply
EXAMPLE_CHARS = 240  # a reply shown beyond this is cut (the whole text is in generations.jsonl)


def _a(row: dict | None) -> str:
    """`a [low, high] (n = N)`, or a dash where the history has no reply at that turn."""
    if row is None:
        return "–"
    return interval_text(row["a"], row["a_low"], row["a_high"], fmt_num, no_interval=None) + (
        f" (n = {row['n']})"
    )


def _comparison(curve: pd.DataFrame) -> str:
    rows = []
    logged = {
        (r["model"], r["item"], r["turn"]): r
        for r in curve[curve["history"] == "logged"].to_dict("records")
    }
    replayed = curve[curve["history"].isin(["reference", "own"])]
    for (model, item, policy), cond in replayed.groupby(["model", "item", "policy"], sort=True):
        by = {(r["history"], r["turn"]): r for r in cond.to_dict("records")}
        for turn in sorted(
            set(cond["turn"]) | {k for m, i, k in logged if (m, i) == (model, item)}
        ):
            rows.append(
                [model, item, policy, int(turn), _a(logged.get((model, item, turn)))]
                + [_a(by.get((history, turn))) for history in ("reference", "own")]
            )
    headers = ["model", "item", "policy", "turn", "logged a(k) [95 % CI]",
               "reference history", "own history"]  # fmt: skip
    return table(headers, rows)


def _means(summary: pd.DataFrame | None) -> str:
    """One sentence per replayed (model, item, policy): mean a(k) per history."""
    if summary is None or "history" not in summary.columns:
        return ""
    rows = summary[summary["history"].isin(HISTORIES) & (summary["item"] != "all")]
    logged = {
        (r["model"], r["item"]): r for r in rows[rows["history"] == "logged"].to_dict("records")
    }
    out = []
    for (model, item, policy), cond in rows[rows["history"] != "logged"].groupby(
        ["model", "item", "policy"], sort=True
    ):
        parts = [("logged", logged.get((model, item)))]
        parts += [(r["history"], r) for r in cond.to_dict("records")]
        said = "; ".join(
            f"{history} "
            + interval_text(r["mean"], r["mean_low"], r["mean_high"], fmt_num, no_interval=None)
            for history, r in parts
            if r is not None
        )
        out.append(f"{item} under {policy} ({model}): mean a(k) over the turns, {said}.")
    return "".join(f'<p class="claim">{esc(s)}</p>' for s in out)


def _reply(record: dict, turn: int) -> str:
    kinds = ("logged",) if record.get("history") == "logged" else ("generated",)
    text = "".join(
        s.get("text", "")
        for s in record.get("segments", [])
        if s.get("kind") in kinds and s.get("turn") == turn
    ).strip()
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + " …"


def _examples(generations: list[dict] | None) -> str:
    """The first conversations turn by turn: the logged reply, and the first sample's reply
    under the first replayed policy with each history."""
    talks = [g for g in generations or [] if g.get("history") in HISTORIES]
    if not talks:
        return ""
    policy = next((g["policy"] for g in talks if g["history"] != "logged"), None)
    first: dict[tuple, dict] = {}
    for g in talks:
        if g["history"] != "logged" and g["policy"] != policy:
            continue
        turns = [s.get("turn") for s in g.get("segments", []) if s.get("kind") == "generated"]
        turn = max((t for t in turns if t), default=None) if g["history"] == "reference" else None
        first.setdefault((g["model"], g["item"], g["conversation_id"], g["history"], turn), g)
    rows = []
    ids = list(dict.fromkeys((k[0], k[1], k[2]) for k in first))[:EXAMPLE_CONVERSATIONS]
    for model, item, conv in ids:
        logged = first.get((model, item, conv, "logged", None))
        own = first.get((model, item, conv, "own", None))
        n = max(s.get("turn") or 0 for s in (logged or own or {}).get("segments", [{}]))
        for turn in range(1, n + 1):
            ref = first.get((model, item, conv, "reference", turn))
            rows.append(
                [item, conv, turn] + [_reply(r, turn) if r else "–" for r in (logged, ref, own)]
            )
    headers = ["item", "conversation", "turn", "logged reply",
               f"reference history ({policy}, first sample)",
               f"own history ({policy})"]  # fmt: skip
    return "<h3>Replies side by side</h3>" + table(headers, rows)


def replay_part(curve: pd.DataFrame | None, summary, generations) -> str:
    """The replay comparison, or "" when the run replays no log."""
    if curve is None or "history" not in curve.columns:
        return ""
    if not curve["history"].isin(["reference", "own"]).any():
        return ""
    intro = note(
        "Replay of logged conversations: the logged reply, the model's reply given the logged "
        "history before the turn (reference: drift, without the model's own errors "
        "snowballing), and its reply given its own earlier replies to the logged user turns "
        "(own). a(k) with its 95 % exact binomial interval; n counts the replies (reference and "
        "own: conversations x samples)."
    )
    return (
        "<h3>Replayed logs, turn by turn</h3>"
        + intro
        + _means(summary)
        + _comparison(curve)
        + _examples(generations)
    )
