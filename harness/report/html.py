"""HTML building blocks. Every string that comes from a run (model output, item ids, model
names, reasons, manifest values) is untrusted and passes `esc` or `script_json` here."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any


def esc(value: Any) -> str:
    """Text for an HTML element or a quoted attribute value."""
    return html.escape(str(value), quote=True)


def script_safe(text: str) -> str:
    """JSON text made safe inside <script>: no `</script>`, `<!--` or `]]>` can form, and the
    JS line separators U+2028/9 cannot end a string early."""
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def script_json(value: Any) -> str:
    return script_safe(json.dumps(value, ensure_ascii=False, allow_nan=False))


def fmt_num(value: Any, digits: int = 3) -> str:
    """A table cell: ints with thousands separators, floats to `digits` significant digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if value == int(value) and abs(value) >= 1:
            return f"{int(value):,}"
        return f"{value:.{digits}g}"
    return str(value)


def fmt_t(t: float) -> str:
    """A continuation position as the verdicts print it: t = 1,800."""
    return f"{int(round(t)):,}"


def fmt_pct(x: float, signed: bool = False) -> str:
    if x is None or math.isnan(x):
        return "–"
    value = round(100 * x)
    return f"{value:+d} %" if signed else f"{value:d} %"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "data") -> str:
    """An HTML table; cells are escaped (numbers formatted first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f"<td>{esc(fmt_num(_plain(v)))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return (
        f'<div class="table-wrap"><table class="{cls}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars, so fmt_num formats them."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def note(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{esc(text)}</p>'


def figure(div_id: str, caption: str, height: int = 420) -> str:
    """A placeholder the page script fills with the figure `div_id`, plus how to read it."""
    return (
        f'<figure><div class="plot" id="{esc(div_id)}" style="height:{int(height)}px"></div>'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>'


def fold(summary: str, body: str, open_: bool = False) -> str:
    """`body` (HTML) in a collapsible part under a one-line `summary` (text, escaped here):
    detail kept, out of the page's height until asked for."""
    state = " open" if open_ else ""
    return f'<details class="fold"{state}><summary>{esc(summary)}</summary>{body}</details>'
