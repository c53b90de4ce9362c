"""Assemble report.html: one self-contained page (plotly.js inlined once, no network use).

Figures travel as one JSON object in a <script type="application/json"> block, escaped by
`script_json` so model output inside hover texts cannot close the tag; a small script draws
them with Plotly.newPlot. Page text from the run is HTML-escaped by the section builders.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.report.conversations import turn_figures
from harness.report.html import esc, note, script_safe
from harness.report.load import KNOWN_FILES, load_run
from harness.report.logs import LOG_TITLES, WORST, log_sections
from harness.report.prescription import prescription_rows, write_prescription
from harness.report.sections import TITLES, build_sections

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde2ea; --bg:#f7f8fa; --accent:#1f5fbf; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--fg); background:var(--bg); }
header { padding:18px 28px; background:#fff; border-bottom:1px solid var(--line); }
header h1 { margin:0 0 4px; font-size:20px; }
header p { margin:0; color:var(--muted); }
nav { position:sticky; top:0; z-index:5; background:#fff; border-bottom:1px solid var(--line);
  padding:6px 28px; display:flex; gap:14px; flex-wrap:wrap; }
nav a { color:var(--accent); text-decoration:none; font-size:13px; }
main { max-width:1280px; margin:0 auto; padding:8px 28px 40px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; margin:18px 0;
  padding:14px 20px; }
h2 { font-size:17px; margin:4px 0 10px; } h3 { font-size:14px; margin:14px 0 6px; }
.note { color:var(--muted); margin:6px 0; } .claim { border-left:3px solid #c9a227;
  padding:4px 10px; background:#fffaf0; margin:8px 0; }
figure { margin:8px 0 16px; } figcaption { color:var(--muted); font-size:13px; max-width:980px; }
.cards { display:grid; grid-template-columns:repeat(auto-fill,minmax(340px,1fr)); gap:12px; }
.card { border:1px solid var(--line); border-left:4px solid var(--accent); border-radius:6px;
  padding:8px 12px; background:#fcfdff; } .card h3 { margin:2px 0 6px; }
.card p { margin:4px 0; } .card-mechanism { border-left-color:#7b3fb0; }
.card-correlation, .card-predictor { border-left-color:#2b8a3e; }
.table-wrap { overflow-x:auto; } table.data { border-collapse:collapse; font-size:12.5px; }
table.data th, table.data td { border-bottom:1px solid var(--line); padding:3px 8px;
  text-align:left; white-space:nowrap; } table.data th { background:#f1f3f7; }
pre { background:#f1f3f7; padding:8px; overflow-x:auto; font-size:12px; }
.filters { margin:6px 0 10px; color:var(--muted); }
details.sample { border:1px solid var(--line); border-radius:6px; margin:6px 0; padding:4px 10px; }
details.sample summary { cursor:pointer; font-size:13px; }
details.fold { margin:6px 0; } details.fold > summary { cursor:pointer; color:var(--accent); }
.left-out { font-size:13px; } .left-out details { display:inline; }
table.prescription td { white-space:normal; max-width:360px; }
details.sample[data-fail="1"] summary { color:#a61e1e; }
.prompt { font-size:12px; color:var(--muted); margin:6px 0; white-space:pre-wrap; }
.gen-text { white-space:pre-wrap; font-family:ui-monospace,Menlo,Consolas,monospace;
  font-size:12.5px; line-height:1.6; }
.w-pass { background:#e9f7ee; } .w-fail { background:#fde2e2; text-decoration:underline wavy #d33; }
.w-undetermined { background:#eef0f3; } .w { border-left:2px solid #b8c2d3; }
.seg-injected, .seg-restatement { border:1px dashed #1f5fbf; background:#e8f0fd;
  border-radius:3px; padding:0 2px; }
.seg-restatement { border-color:#7b3fb0; background:#f3ebfb; }
.seg-injected::before { content:"reminder ▸ "; color:#1f5fbf; font-weight:600; }
.seg-restatement::before { content:"restated ▸ "; color:#7b3fb0; font-weight:600; }
.turn { margin:8px 0; } .turn-k { color:var(--muted); font-size:11px; margin:2px 0; }
.chat-user { background:#eef3fb; border-radius:8px; padding:4px 10px; margin:4px 25% 4px 0; }
.chat-assistant { background:#fafbfc; border:1px solid var(--line); border-radius:8px;
  padding:4px 10px; margin:4px 0 4px 12%; }
.chat-logged { border-style:dashed; color:#444; }
table.logs td { white-space:pre-wrap; vertical-align:top; max-width:460px; min-width:60px; }
.gates-pass, .gate-pass td:first-child { color:#2b8a3e; font-weight:600; }
.gates-fail, .gate-fail td:first-child { color:#a61e1e; font-weight:600; }
.gate-fail { background:#fdecec; }
.gates-undecided, .gate-undecided td:first-child { color:#9a6700; font-weight:600; }
.gate-undecided { background:#fff8e1; }
"""

DRAW_JS = """
(function () {
  var figs = JSON.parse(document.getElementById("figure-data").textContent);
  var config = {displaylogo: false, responsive: true, showLink: false, showSendToCloud: false,
                showEditInChartStudio: false, modeBarButtonsToRemove: ["sendDataToCloud"]};
  Object.keys(figs).forEach(function (id) {
    var el = document.getElementById(id);
    if (el) { Plotly.newPlot(el, figs[id].data, figs[id].layout, config); }
  });
  function filter() {
    var item = document.getElementById("f-item"), policy = document.getElementById("f-policy");
    var fail = document.getElementById("f-fail");
    document.querySelectorAll("details.sample").forEach(function (d) {
      var show = (!item.value || d.dataset.item === item.value) &&
                 (!policy.value || d.dataset.policy === policy.value) &&
                 (!fail.checked || d.dataset.fail === "1");
      d.style.display = show ? "" : "none";
    });
  }
  // a figure drawn while its part was folded has no width yet: size it when it opens
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", function () {
      if (d.open) { d.querySelectorAll(".js-plotly-plot").forEach(function (p) {
        Plotly.Plots.resize(p); }); }
    });
  });
  ["f-item", "f-policy", "f-fail"].forEach(function (id) {
    var el = document.getElementById(id);
    if (el) { el.addEventListener("change", filter); }
  });
})();
"""


@functools.cache
def plotly_js() -> str:
    """The plotly.min.js that ships inside the installed `plotly` package (no CDN)."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    text = path.read_text(encoding="utf-8")
    # A literal end tag inside the library would end the inline script early.
    return text.replace("</script", "<\\/script")


def figures_json(figs: dict) -> str:
    """{div id: {data, layout}} as script-safe JSON; NaN becomes null (plotly's encoder)."""
    import plotly.io as pio

    parts = [f"{json.dumps(k)}:{pio.to_json(fig, validate=False)}" for k, fig in figs.items()]
    return script_safe("{" + ",".join(parts) + "}")


def page(
    title: str, subtitle: str, sections: list[str], figs: dict, anchors: list[str] | None = None
) -> str:
    titles = TITLES | LOG_TITLES
    shown = TITLES if anchors is None else {a: titles[a] for a in anchors}
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in shown.items())
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header><nav>{nav}</nav>"
        f"<main>{''.join(sections)}</main>"
        f'<script type="application/json" id="figure-data">{figures_json(figs)}</script>'
        f"<script>{plotly_js()}</script><script>{DRAW_JS}</script></body></html>\n"
    )


def _title(data) -> tuple[str, str]:
    m = data.manifest or {}
    name = m.get("name") or m.get("run_id") or data.run_dir.name
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    files = ", ".join(sorted([*data.frames, *(["generations.jsonl"] if data.generations else [])]))
    return f"Prompt persistence: {name}", f"Rendered {stamp} from {files}.{_units_line(m)}"


def _units_line(manifest: dict) -> str:
    """Which unit t is in, and on a chat endpoint what was sent and who answered."""
    units = manifest.get("t_unit") or {}
    parts = (
        [f" t is counted in: {'; '.join(f'{k}: {v}' for k, v in units.items())}."] if units else []
    )
    for model, h in (manifest.get("hosted") or {}).items():
        cost = (
            ""
            if h.get("cost_usd") is None
            else f", USD {h['cost_usd']:.4f} (prices of {h.get('price_as_of')})"
        )
        parts.append(
            f" {model} via chat endpoint: {h.get('requests', 0)} requests sent, "
            f"{h.get('cached', 0)} from the run's cache, {h.get('failed', 0)} failed, "
            f"{h.get('refused', 0)} refused or filtered; {h.get('input_tokens', 0)} input / "
            f"{h.get('output_tokens', 0)} output tokens{cost}; answered by "
            f"{h.get('served_model')} {' '.join(h.get('fingerprints') or [])}."
        )
    return "".join(parts)


def t_unit_of(data) -> str | None:
    """The unit of t the run's files name (their `t_unit` column), None where none says."""
    for frame in data.frames.values():
        if "t_unit" in frame.columns and len(frame):
            units = frame["t_unit"].dropna().astype(str).unique()
            return " / ".join(sorted(units)) or None
    return None


def label_t_axes(figs: dict, unit: str | None) -> None:
    """Every x axis over positions t (titled `t ...` or `... position t ...`) names the unit
    t is in, e.g. `t (continuation position) [logprobs+chars]`; turn axes are left alone."""
    if not unit:
        return

    def label(axis) -> None:
        title = axis.title.text or ""
        if title == "t" or title.startswith("t ") or "position t" in title:
            axis.update(title_text=f"{title} [{unit}]")

    for fig in figs.values():
        if hasattr(fig, "for_each_xaxis"):  # a plotly figure (not a figure's JSON)
            fig.for_each_xaxis(label)


def is_log_folder(data) -> bool:
    """A folder `harness score` wrote from a chat log (its manifest says so)."""
    return (data.manifest or {}).get("command") == "score"


def _log_page(data) -> str:
    """A scored log's page: only the sections a log has, then one line naming the files the
    folder does not hold (so nothing else is shown)."""
    curve = data.frame("turn_adherence.csv")
    figures = turn_figures(curve) if curve is not None else ("", {})
    sections, figs, anchors = log_sections(data, figures)
    absent = [name for name in KNOWN_FILES if name not in data.readable and name not in
              data.problems and not (data.run_dir / name).is_file()]  # fmt: skip
    ran = "gates or judge" if "gates.csv" in absent else "or judge"  # --gates: gates ran
    sections.append(
        note(
            f"This folder holds a scored log, so it does not contain {', '.join(absent)} "
            f"(no generation, probe, fits {ran} ran)."
        )
    )
    log = Path(str((data.manifest or {}).get("log", data.run_dir.name))).name
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"Rendered {stamp} from {', '.join(sorted(data.readable))}."
    return page(f"Logged conversations: {log}", subtitle, sections, figs, anchors)


def render_report(
    run_dir: Path,
    worst: int | None = None,
    with_text: bool = True,
    files: Mapping[str, Path] | None = None,
) -> Path:
    """Read the run folder's stored files and write `report.html` there atomically. `worst`:
    the logged conversations shown; `with_text=False`: no text of a log in the page; `files`:
    the files to read, name -> path (the report stage's: what this run wrote), else those the
    folder's run wrote (`harness.report.load.run_files`). A run's page (not a log's) also
    writes prescription.csv, the rows of its first table, where some rule was judged."""
    data = load_run(Path(run_dir), worst or WORST, with_text, chunked=True, files=files)
    if is_log_folder(data):
        text = _log_page(data)
    else:
        write_prescription(data.run_dir, prescription_rows(data))
        sections, figs, anchors = build_sections(data)
        label_t_axes(figs, t_unit_of(data))
        title, subtitle = _title(data)
        text = page(title, subtitle, sections, figs, anchors)
    out = data.run_dir / "report.html"
    atomic_write_text(out, text)
    return out
