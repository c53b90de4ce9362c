"""Sample viewer: each generation's text by segment, reminders marked, windows coloured.

No tokenizer is loaded at report time, so a window's token range [t_start, t_end] is placed in
the text like this: segment boundaries are exact (each segment stores its own text and token
range); inside a generated segment a token offset p maps to the character
round((p - start) / (end - start) * len(text)), moved to the nearest word boundary within
SNAP characters. Window edges can thus be off by a word or so; which windows fail, and their
reasons, are exact (they come from windows.csv).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.html import esc, fold
from harness.results import as_bool

MAX_SAMPLES = 300  # generations shown; a bigger run lists how many were left out
SNAP = 8  # characters a window edge may move to land on a word boundary
SEGMENT_LABEL = {"injected": "injected reminder", "restatement": "restatement", "user": "user"}


@dataclass
class WindowMark:
    index: int
    t_start: int  # 1-based continuation position of the first token
    t_end: int  # inclusive
    status: str  # pass | fail | undetermined
    reasons: str


def window_marks(windows: pd.DataFrame | None) -> dict[tuple, list[WindowMark]]:
    """(model, item, policy, seed, sample) -> windows with pass status and failing reasons."""
    if windows is None:
        return {}
    w = windows[windows["window"] >= 0]
    if "check" in w.columns and (w["check"] == "all").any():
        w = w[w["check"] == "all"]  # the stored all-checks row decides, when there is one
    seed = w["seed"] if "seed" in w.columns else 0
    w = w.assign(seed=seed, ok=w["passed"].map(as_bool))
    out: dict[tuple, list[WindowMark]] = {}
    keys = ["model", "item", "policy", "seed", "sample", "window"]
    for key, rows in w.groupby(keys, sort=True):
        decided = [v for v in rows["ok"] if v is not None]
        status = "undetermined" if not decided else "pass" if all(decided) else "fail"
        failing = rows[rows["ok"] == False]  # noqa: E712 (None must not count as a failure)
        reasons = "; ".join(
            f"{c}: {r}" if r else str(c)
            for c, r in zip(failing.get("check", ""), failing.get("reason", ""), strict=False)
        )
        mark = WindowMark(int(key[5]), int(rows["t_start"].iloc[0]), int(rows["t_end"].iloc[0]),
                          status, reasons)  # fmt: skip
        sample_key = (str(key[0]), str(key[1]), str(key[2]), int(key[3]), int(key[4]))
        out.setdefault(sample_key, []).append(mark)
    return out


def _snap(text: str, c: int) -> int:
    if c <= 0 or c >= len(text) or text[c - 1].isspace():
        return max(0, min(c, len(text)))
    for d in range(1, SNAP + 1):
        for cand in (c - d, c + d):
            if 0 < cand < len(text) and text[cand - 1].isspace():
                return cand
    return c


def char_of(text: str, start: int, end: int, p: int) -> int:
    """Character offset in a segment's text of token offset p (start <= p <= end)."""
    if p <= start or end <= start:
        return 0
    if p >= end:
        return len(text)
    return _snap(text, round((p - start) / (end - start) * len(text)))


def _generated_html(seg: dict, marks: list[WindowMark]) -> str:
    text, s, e = str(seg.get("text", "")), int(seg["start"]), int(seg["end"])
    pieces, cursor = [], 0
    for mark in marks:
        lo, hi = max(s, mark.t_start - 1), min(e, mark.t_end)
        if lo >= hi:
            continue
        a, b = max(cursor, char_of(text, s, e, lo)), char_of(text, s, e, hi)
        if a > cursor:
            pieces.append(esc(text[cursor:a]))
        if b > a:
            tip = f"window {mark.index} · t {mark.t_start}–{mark.t_end} · {mark.status}"
            tip += f" · {mark.reasons}" if mark.reasons else ""
            pieces.append(
                f'<span class="w w-{mark.status}" title="{esc(tip)}">{esc(text[a:b])}</span>'
            )
            cursor = b
    pieces.append(esc(text[cursor:]))
    return "".join(pieces)


def _boxed(seg: dict) -> str:
    kind = str(seg.get("kind", ""))
    tip = f"{SEGMENT_LABEL.get(kind, kind)} ({seg.get('source', '')}) · tokens "
    tip += f"{seg.get('start')}–{seg.get('end')}"
    cls = "seg-restatement" if kind == "restatement" else "seg-injected"
    return f'<span class="{cls}" title="{esc(tip)}">{esc(seg.get("text", ""))}</span>'


def _chat_html(segments: list[dict], marks: list[WindowMark]) -> str:
    """A conversation as a chat: per turn the user's message (turn 1's is the prompt, shown
    above), reminders boxed, then the reply with its windows (a replay's logged replies
    dashed); chat markup is not shown."""
    turns: dict[int, list[dict]] = {}
    for seg in segments:
        turns.setdefault(int(seg.get("turn") or 1), []).append(seg)
    out = []
    for turn, segs in sorted(turns.items()):
        parts = []
        for seg in segs:
            kind = str(seg.get("kind", "generated"))
            if kind == "generated":
                parts.append(f'<div class="chat-assistant">{_generated_html(seg, marks)}</div>')
            elif kind == "logged":  # a replay's history: the log's reply, not the model's
                text = esc(seg.get("text", ""))
                parts.append(f'<div class="chat-assistant chat-logged"><b>logged</b>: {text}</div>')
            elif kind == "user":
                who = "simulated user" if seg.get("source") == "simulator" else "user"
                text = esc(seg.get("text", ""))
                parts.append(f'<div class="chat-user" title="{who}"><b>{who}</b>: {text}</div>')
            elif kind != "markup":
                parts.append(f"<div>{_boxed(seg)}</div>")
        out.append(f'<div class="turn"><div class="turn-k">turn {turn}</div>{"".join(parts)}</div>')
    return "".join(out)


def sample_html(record: dict, marks: list[WindowMark], open_: bool = False) -> str:
    """One generation: prompt, then the continuation segment by segment (a conversation:
    turn by turn, as a chat)."""
    segments = record.get("segments") or []
    if not any(seg.get("text") for seg in segments):
        n = len(record.get("continuation_ids") or []) or 1
        segments = [{"kind": "generated", "start": 0, "end": n, "text": record.get("text", "")}]
    body = []
    if any(seg.get("turn") is not None for seg in segments):
        body.append(_chat_html(segments, marks))
    else:
        for seg in segments:
            kind = str(seg.get("kind", "generated"))
            body.append(_generated_html(seg, marks) if kind == "generated" else _boxed(seg))
    prompt = "".join(
        f'<div class="msg"><b>{esc(m.get("role", ""))}</b>: {esc(m.get("content", ""))}</div>'
        for m in record.get("prompt_messages") or []
        if isinstance(m, dict)
    )
    n_fail = sum(m.status == "fail" for m in marks)
    tokens = record.get("tokens") or {}
    head = (
        f"{record.get('item', '')} · {record.get('policy', '')} · {record.get('model', '')} · "
        f"sample {record.get('sample', 0)} (seed {record.get('seed', '')}) · "
        f"{n_fail}/{len(marks)} windows failing · {tokens.get('generated', '?')} generated tokens"
        f" · {record.get('finish_reason', '')}"
    )
    attrs = (
        f'data-item="{esc(record.get("item", ""))}" data-policy="{esc(record.get("policy", ""))}" '
        f'data-fail="{1 if n_fail else 0}"'
    )
    return (
        f'<details class="sample" {attrs}{" open" if open_ else ""}><summary>{esc(head)}</summary>'
        f'<div class="prompt">{prompt}</div><div class="gen-text">{"".join(body)}</div></details>'
    )


def _key(record: dict) -> tuple:
    return (
        str(record.get("model", "")),
        str(record.get("item", "")),
        str(record.get("policy", "")),
        int(record.get("seed", 0) or 0),
        int(record.get("sample", 0) or 0),
    )


def viewer_html(records: list[dict], windows: pd.DataFrame | None) -> str:
    marks = window_marks(windows)
    ordered = sorted(records, key=_key)
    shown = ordered[:MAX_SAMPLES]
    items = sorted({str(r.get("item", "")) for r in shown})
    policies = sorted({str(r.get("policy", "")) for r in shown})
    options = lambda values: "".join(  # noqa: E731
        f'<option value="{esc(v)}">{esc(v)}</option>' for v in values
    )
    controls = (
        '<div class="filters">item <select id="f-item"><option value="">all</option>'
        f'{options(items)}</select> policy <select id="f-policy"><option value="">all</option>'
        f'{options(policies)}</select> <label><input type="checkbox" id="f-fail"> only samples '
        "with a failing window</label></div>"
    )
    left_out = len(ordered) - len(shown)
    tail = f'<p class="note">{left_out} more generations are not shown.</p>' if left_out else ""
    # The first sample with a failing window of each item opens by default: the highlighting
    # is then visible without a click.
    opened: set[str] = set()
    parts = []
    for r in shown:
        sample_marks = marks.get(_key(r), [])
        item = str(r.get("item", ""))
        failing = any(m.status == "fail" for m in sample_marks)
        parts.append(sample_html(r, sample_marks, open_=failing and item not in opened))
        if failing:
            opened.add(item)
    samples = "".join(parts)
    failing = sum(any(m.status == "fail" for m in marks.get(_key(r), [])) for r in shown)
    listing = fold(
        f"{len(shown)} generations, {failing} with a failing window: read each",
        f'<div id="sample-list">{samples}</div>',
    )
    return controls + listing + tail
