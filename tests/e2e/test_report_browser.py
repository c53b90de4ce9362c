"""`harness report DIR` as a user runs it, then report.html in headless Chromium: the plots
render offline, hostile model output shows as text and runs no script, and the page is short
enough to read (issue 56: measured at 1,280 px wide, the prescription on the first screen)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_module import load_script

CHROMIUM = Path("/usr/bin/chromium")
DATA = Path(__file__).parents[1] / "data"
MAKE_RUN = DATA / "report_run" / "make_run.py"
# the page heights issue 56 allows at 1,280 px wide (the reports it measured: 32,904 px for
# the quickstart, 20,431 px for a chat run of a five-rule prompt)
HEIGHTS = {
    "quickstart": (DATA / "report_run" / "make_quickstart_run.py", 12_000),
    "chat": (DATA / "chat_run" / "make_run.py", 8_000),
}
FIRST_SCREEN = 800  # px: a laptop's first screen at 1,280 px wide
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
N_FIGURES = 14  # the synthetic run has every figure: forks (fig-carried), the attention
# share (fig-attention-share, fig-attention-exponent) and one per rule (fig-rule-0, fig-rule-1)
# included
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
]  # fmt: skip

pytestmark = pytest.mark.e2e


def _build_run(dest: Path, maker: Path = MAKE_RUN) -> Path:
    module = load_script(maker, f"make_{maker.parent.name}_{maker.stem}")
    return module.build_run(dest)


@pytest.fixture(scope="module")
def report_path(tmp_path_factory) -> Path:
    run = _build_run(tmp_path_factory.mktemp("browser") / "run")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "report", str(run)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(run / "report.html")
    return run / "report.html"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            "Debian's chromium is not installed at /usr/bin/chromium "
            "(scripts/setup.sh installs it; or: apt-get install -y chromium)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_report_renders_offline_without_running_model_output(report_path, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    alerts, errors, requests = [], [], []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report_path.as_uri())
    page.wait_for_function(f"document.querySelectorAll('.plotly').length >= {N_FIGURES}")
    page.wait_for_timeout(500)  # let the last figures finish drawing

    assert page.locator(".plotly").count() == N_FIGURES
    assert page.locator("svg.main-svg").count() >= 2 * N_FIGURES  # plot + overlay layer each
    assert page.locator(".plotly .scatterlayer .trace").count() > 50

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")

    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    text = page.inner_text("body")
    for literal in HOSTILE:
        assert literal in text
    assert "</script><script>alert(4)</script>" in text  # the manifest value, as text
    assert page.locator("img").count() == 0  # the injected <img> never became an element
    page.wait_for_timeout(300)
    assert alerts == [] and errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests


def test_sample_filters(report_path, browser):
    page = browser.new_page()
    page.goto(report_path.as_uri())
    visible = (
        "[...document.querySelectorAll('details.sample')].filter(d => d.style.display !== 'none')"
    )
    assert page.evaluate(f"{visible}.length") == 24
    page.select_option("#f-item", "pirate")
    assert page.evaluate(f"{visible}.every(d => d.dataset.item === 'pirate')")
    page.check("#f-fail")
    # pirate samples with a failing window: none 4, restate 1, periodic 1.
    assert page.evaluate(f"{visible}.length") == 6


def test_a_scored_log_s_report_shows_the_failing_turns_as_text(browser, tmp_path):
    """`harness score` on a chat log whose reply holds markup: the report of the log renders
    offline, its failing-turns table shows the reply as text and runs nothing (the picture in
    docs/logs-report.png is this page on a larger log)."""
    import json

    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: s\nitems:\n  - {id: fr, system: Réponds en français., user: Bonjour,\n"
        "     checks: [{type: language, target: fr}]}\n",
        encoding="utf-8",
    )
    reply = "Then we speak English now. " + HOSTILE[0] + " " + HOSTILE[1] + " and so on today."
    talk = [
        {"role": "system", "content": "Réponds en français."},
        {"role": "user", "content": [{"type": "text", "text": "Bonjour !"}]},
        {"role": "assistant", "content": "Bonjour, je vous écoute avec plaisir aujourd'hui."},
        {"role": "user", "content": "Speak English?"},
        {"role": "assistant", "content": reply},
    ]
    log = tmp_path / "talks.jsonl"
    log.write_text(json.dumps({"id": "c-1", "messages": talk}) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "score", str(log), "--suite", str(suite),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    alerts, errors, requests = [], [], []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto((tmp_path / "out" / "report.html").as_uri())
    page.wait_for_function("document.querySelectorAll('#turns .plotly').length >= 2")
    failing = page.inner_text("#failing")
    assert "c-1" in failing and "Speak English?" in failing
    for literal in HOSTILE:
        assert literal in failing
    assert page.locator("img").count() == 0 and page.locator("#failing script").count() == 0
    page.wait_for_timeout(300)
    assert alerts == [] and errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests


@pytest.mark.parametrize("kind", sorted(HEIGHTS))
def test_the_page_fits_its_height_with_the_prescription_on_the_first_screen(
    kind, browser, tmp_path
):
    """The quickstart-shaped synthetic run (tests/data/report_run/make_quickstart_run.py) and
    a scripted chat run of the five-rule Nordbank prompt (tests/data/chat_run/make_run.py),
    rendered by the CLI: the page is at most its height at 1,280 px, the prescription's table
    starts on the first screen, and opening every folded part loses nothing (the page grows,
    every figure draws at full width)."""
    maker, limit = HEIGHTS[kind]
    run = _build_run(tmp_path / "run", maker)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "report", str(run)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = browser.new_page(viewport={"width": 1280, "height": FIRST_SCREEN})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((run / "report.html").as_uri())
    figures = page.evaluate("document.querySelectorAll('div.plot').length")
    page.wait_for_function(f"document.querySelectorAll('.plotly').length >= {figures}")
    page.wait_for_timeout(500)
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"{kind}: {height} px at 1,280 px wide")
    assert height <= limit
    first = page.locator("main > section").first
    assert first.get_attribute("id") == "prescription"
    assert page.locator("#prescription table").bounding_box()["y"] < FIRST_SCREEN
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    page.wait_for_timeout(800)
    assert page.evaluate("document.documentElement.scrollHeight") > height
    widths = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')].map(p => p.offsetWidth)"
    )
    assert len(widths) == figures and min(widths) > 400, widths
    assert errors == []
