"""Issue 56: the report shows only sections with data, names those left out in one line
(their reasons folded, nothing lost), and folds a verdict said for many conditions into one
line with each condition's sentence kept in a collapsible part."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.folding import fold_cards, verdict_key
from harness.report.load import load_run
from harness.report.sections import TITLES, build_sections
from harness.report.verdicts import Card
from tests.script_module import load_script

MAKE_RUN = Path(__file__).parents[1] / "data" / "report_run" / "make_run.py"
DROPPED = ("divergence.csv", "fits.csv", "attention.csv", "relay.csv", "bias.csv")


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    module = load_script(MAKE_RUN, "report_make_run")
    return module.build_run(tmp_path_factory.mktemp("page") / "run")


def test_sections_without_data_are_left_out_and_named_in_one_line(synthetic_run):
    for name in DROPPED:
        (synthetic_run / name).unlink()
    html, _, anchors = build_sections(load_run(synthetic_run))
    for gone in ("divergence", "alpha", "attention", "theory"):
        assert gone not in anchors
        assert f'<section id="{gone}">' not in "".join(html)
    assert anchors[0] == "prescription" and "adherence" in anchors and "samples" in anchors
    (line,) = [part for part in html if 'class="left-out' in part]
    assert html.index(line) == 1  # right under the prescription
    head = line[: line.index("<details>")]
    for title in ("Divergence decay", "α by layer", "Theory"):
        assert TITLES[next(a for a, t in TITLES.items() if t == title)] in head
    # nothing lost: each one's reason is in the folded part
    assert "divergence.csv is not in this run folder" in line and "</details>" in line


SENTENCE = (
    "{p}: cannot tell whether removing the system prompt still changes behaviour from the "
    "last fork (t = {t}) on: with n = 2 records the dependence +0.50 [-0.70, 1.00] contains 0 "
    "but reaches beyond ±0.25."
)


def test_eight_near_identical_cannot_tell_sentences_fold_into_one_line():
    cards = [
        Card(title=f"Prompt or text? {item} (m)", kind="carried",
             sentences=[SENTENCE.format(p=p, t=t) for p, t in (("none", 256), ("restate", 160))])
        for item in ("fr", "lower", "ada", "conv")
    ]  # fmt: skip
    cards.append(Card(title="none", sentences=["none: holds 90 % to t = 1,800."]))
    kept, folded = fold_cards(cards)
    assert [c.title for c in kept] == ["none"]  # the decided verdict stays as it was
    assert folded.count('class="card card-folded"') == 1
    assert "(8 conditions)" in folded and folded.count("<li>") == 8
    assert "<details>" in folded and "t = 160" in folded  # each sentence kept, folded
    assert verdict_key(SENTENCE.format(p="none", t=64)) == verdict_key(
        SENTENCE.format(p="periodic-64-user", t=0)
    )


def test_two_cannot_tell_sentences_stay_as_they_are():
    cards = [Card(title="x", sentences=[SENTENCE.format(p="none", t=0)]),
             Card(title="y", sentences=[SENTENCE.format(p="none", t=64)])]  # fmt: skip
    kept, folded = fold_cards(cards)
    assert kept == cards and folded == ""
