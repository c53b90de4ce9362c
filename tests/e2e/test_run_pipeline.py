"""`harness run` as a user runs it: every output file, resume after SIGKILL at any stage gives
the same CSVs as an uninterrupted run, one writer per folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.report.load import read_result
from harness.results import RESULT_FILES, frame_columns

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

CONFIGS = Path(__file__).parent.parent / "data" / "configs"
OUTPUTS = (
    "generations.jsonl", "windows.csv", "adherence.csv", "adherence_curve.csv", "survival.csv",
    "divergence.csv", "nexttoken.csv", "attention.csv",
    "fits.csv", "summary.csv", "correlation.csv", "predictor.csv", "policies.csv",
    "manifest.json", "report.html", "relay.csv", "bias.csv",
    "forks.jsonl", "forks.csv", "carried.csv", "linkage.csv",
)  # fmt: skip
CSVS = [name for name in OUTPUTS if name.endswith(".csv")]


def _cmd(config: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        str(CONFIGS / config),
        "--out",
        str(out),
        *extra,
    ]


def _run(config: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(config, out, *extra), capture_output=True, text=True, timeout=1200)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_path):
    out = tmp_path_factory.mktemp("runs") / "whole"
    done = _run("tiny-kill.yaml", out)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done


@pytest.fixture(scope="module")
def uninterrupted(finished):
    return finished[0]


def test_run_is_quiet_and_ends_with_the_summary_table(finished):
    out, done = finished
    lines = (done.stdout + done.stderr).splitlines()
    assert not [line for line in lines if " INFO " in line], "engine logs leaked"
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr
    assert len(lines) < 60
    assert "adherence AUC, all rules [95% CI]" in done.stdout and "half-life (t)" in done.stdout
    table = done.stdout[done.stdout.index("adherence AUC") :]
    for policy in ("none", "periodic-16-user"):
        assert policy in table
    assert done.stdout.rstrip().endswith(f"report: {out / 'report.html'}")


def test_run_writes_every_output(uninterrupted):
    for name in OUTPUTS:
        assert (uninterrupted / name).is_file(), name
    for name in CSVS:  # every file through its row model: the declared header, valid cells
        frame, problem = read_result(uninterrupted / name, RESULT_FILES[name])
        assert problem is None, (name, problem)
        assert list(frame.columns) == frame_columns(RESULT_FILES[name], frame.columns), name
    records = [json.loads(line) for line in (uninterrupted / "generations.jsonl").open()]
    assert len(records) == 2 * 2 * 2  # items x policies x samples
    assert {r["policy"] for r in records} == {"none", "periodic-16-user"}
    assert all(r["tokens"]["generated"] == 48 for r in records)
    periodic = [r for r in records if r["policy"] == "periodic-16-user"]
    assert all(
        sum(s["source"] == "reminder" for s in r["segments"]) == 2 for r in periodic
    )  # after 16 and 32 of 48 generated tokens
    summary = pd.read_csv(uninterrupted / "summary.csv")
    trained = summary[summary.model == "tiny-random-llama"]
    assert len(trained) == 4 and trained.auc.between(0, 1).all()
    assert (trained.loc[trained.policy == "none", "token_overhead"] == 0).all()
    assert (trained.loc[trained.policy != "none", "token_overhead"] > 0).all()
    div = pd.read_csv(uninterrupted / "divergence.csv")
    assert set(div.model) == {"tiny-random-llama", "untrained:tiny-random-llama"}
    assert set(div.layer) == set(range(5))  # embeddings + 4 layers
    assert (div.loc[div.layer == 0, "l2"] == 0).all()  # shared continuation embeddings
    fits = pd.read_csv(uninterrupted / "fits.csv")
    # layer 0: the shared continuation's embeddings; the prompts themselves differ
    assert fits.loc[fits.layer == 0, "reason"].str.startswith("all distances zero").all()
    per_model = fits[(fits.item == "all") & (fits.policy == "all") & (fits.pair == "all")]
    assert set(per_model.model) == set(div.model)  # the rows the report's alpha by layer reads
    assert len(per_model[per_model.metric == "rel_l2"]) == 2 * 5
    att = pd.read_csv(uninterrupted / "attention.csv")  # the hf probe: every pair, layers 1..4
    assert set(att.model) == set(div.model) and set(att.layer) == {1, 2, 3, 4}
    assert att[["share_prompt_mean", "share_sink_mean"]].sum(axis=1).between(0, 1 + 1e-6).all()
    assert (att.share_prompt_max_head >= att.share_prompt_mean - 1e-9).all()
    assert len(per_model[per_model.metric == "share_prompt_mean"]) == 2 * 4
    bias = pd.read_csv(uninterrupted / "bias.csv")
    assert set(bias.lam) == {0.0, 1.0} and set(bias.model) == set(div.model)
    assert (bias.n_pairs == 2).all()  # one `none` sample per item
    assert (
        bias[bias.layer == 0].share_alpha.isna().all()
        and bias[bias.layer >= 1].share_alpha.notna().all()
    )
    plain = fits[(fits.pair == "all") & (fits.metric == "rel_l2") & (fits.policy == "none")]
    assert len(plain) > 0
    relay = pd.read_csv(uninterrupted / "relay.csv")
    first = relay[relay.layer == 1]
    assert ((first.delta - 8 / (8 + first.t)).abs() < 1e-12).all()  # relay layer 1: P / (P + t)
    manifest = json.loads((uninterrupted / "manifest.json").read_text())
    assert manifest["models"]["tiny-random-llama"]["content_key"]
    assert (
        "transformers" in manifest["versions"]
        and "generate tiny-random-llama" in manifest["timings"]
    )


# tiny-kill without forks, probe or theory, with gates (one on a rule alone): an "other config"
REUSED_CONFIG = """\
name: tiny-reused
models: [tiny-random-llama]
suites: [mini-suite.yaml]
items: [mini-fr, mini-lower]
policies: [none, {name: periodic, every: 16, placement: user}]
samples: 2
generation: {engine: hf, max_tokens: 48, temperature: 0.8, continue_on_eos: true}
scoring: {window: 16}
probe: {enabled: false}
theory: {relay: null, bias_lams: []}
gates:
  - {metric: auc, policy: none, min: 0}
  - {metric: auc, policy: none, rule: "language:fr", min: 0, items: [mini-fr]}
"""
# what tiny-kill wrote and tiny-reused does not: the earlier config's stale files
STALE = ("forks.csv", "forks.jsonl", "carried.csv", "relay.csv", "bias.csv")


def test_a_reused_folder_s_report_and_gates_read_only_this_run_s_files(uninterrupted, tmp_path):
    """`harness run` into a folder an earlier run with another config (forks, theory) left its
    files in: manifest.json lists what this run wrote; its report, `harness report` and
    `harness gate` read those only (no forks or relay section from stale files), and
    `harness gate` writes the run's gates.csv byte for byte. A stale conversations.csv that is
    no readable CSV proves that neither gates nor report opens a file this run did not
    write."""
    out = tmp_path / "reused"
    shutil.copytree(uninterrupted, out)
    earlier = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="fig-carried"' in earlier and "relay.csv is not in" not in earlier
    (out / "conversations.csv").write_bytes(b"model,item\n\x80\xff an earlier run's\n")
    shutil.copy(CONFIGS / "mini-suite.yaml", tmp_path / "mini-suite.yaml")
    config = tmp_path / "reused.yaml"
    config.write_text(REUSED_CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(config), "--out", str(out)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert {"generations.jsonl", "summary.csv", "rules.csv", "gates.csv"} <= set(files)
    assert not set(files) & {*STALE, "conversations.csv"}
    assert all((out / name).is_file() for name in STALE)  # left in place, never read
    for report in ("run", "harness report"):
        if report == "harness report":
            (out / "report.html").unlink()
            again = subprocess.run(
                [sys.executable, "-m", "harness", "report", str(out)],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert again.returncode == 0, again.stderr[-2000:]
        html = (out / "report.html").read_text(encoding="utf-8")
        for name in ("carried.csv", "relay.csv", "bias.csv"):
            assert f"{name} is not in this run folder" in html, (report, name)
        assert 'id="fig-carried"' not in html, report
    gates = (out / "gates.csv").read_bytes()
    assert pd.read_csv(out / "gates.csv")["verdict"].tolist() == ["pass"] * 3
    regated = subprocess.run(
        [sys.executable, "-m", "harness", "gate", str(out), str(config)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert regated.returncode == 0, regated.stderr[-2000:]
    assert (out / "gates.csv").read_bytes() == gates


def test_forks_share_the_records_prefix_and_carried_notes_the_skip(uninterrupted):
    records = {
        (r["item"], r["policy"], r["sample"]): r
        for r in map(json.loads, (uninterrupted / "generations.jsonl").open())
    }
    arms = [json.loads(line) for line in (uninterrupted / "forks.jsonl").open()]
    assert {a["sample"] for a in arms} == {0}  # records: 1 per condition
    for arm in arms:
        record = records[(arm["item"], arm["policy"], arm["sample"])]
        if arm["arm"] == "with":
            assert arm["prompt_tokens"] == len(record["prompt_ids"]) + arm["fork_t"]
        assert len(arm["token_ids"]) <= 8
    forks = pd.read_csv(uninterrupted / "forks.csv")
    assert set(forks.arm) == {"with", "without"} and set(forks.draw) == {0, 1}
    carried = pd.read_csv(uninterrupted / "carried.csv", keep_default_na=False, na_values=[""])
    assert len(carried) == 2 * 2 * 4  # items x policies x positions
    none_60 = carried[(carried.policy == "none") & (carried.fork_t == 60)]
    assert (none_60.records == 0).all() and none_60.dependence.isna().all()
    assert none_60.reason.str.startswith("past the continuation of every record").all()
    inside = carried[carried.fork_t < 48]
    assert (inside.records == 1).all() and (inside.draws == 2).all()
    assert inside.dependence_low.le(inside.dependence).all()
    assert inside.dependence.le(inside.dependence_high).all()
    assert inside.kl.notna().all()  # sample 0 of every condition is probed
    linkage = pd.read_csv(uninterrupted / "linkage.csv")
    assert {"alpha_auc_item", "kl_dependence_item"} <= set(linkage.kind)
    assert "Prompt or text?" in (uninterrupted / "report.html").read_text()


def _run_and_kill(out: Path, ready, timeout: float = 900) -> None:
    """Start `harness run` into `out` and SIGKILL its whole process group once `ready()`."""
    process = subprocess.Popen(
        _cmd("tiny-kill.yaml", out),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready():
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return
        if process.poll() is not None:
            pytest.fail("run finished before the kill point was reached")
        time.sleep(0.05)
    pytest.fail("kill point never reached")


def _units(out: Path, stage: str) -> int:
    folder = out / "cache" / stage
    return (
        len([p for p in folder.glob("*") if not p.name.startswith(".")]) if folder.exists() else 0
    )


def test_sigkill_mid_generation_and_mid_probe_then_resume_gives_same_csvs(uninterrupted, tmp_path):
    out = tmp_path / "killed"
    # 1) killed after the first generation unit is stored, before the second
    _run_and_kill(out, lambda: _units(out, "generate") >= 1)
    assert _units(out, "generate") < 2 and not (out / "report.html").exists()
    # 2) resumed, then killed mid-probe (some pairs probed, not all)
    _run_and_kill(out, lambda: _units(out, "probe") >= 1)
    assert _units(out, "probe") < 16
    # 3) resumed to the end
    done = _run("tiny-kill.yaml", out)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in CSVS:
        assert (out / name).read_text() == (uninterrupted / name).read_text(), name
    # the records are the same too, but for the wall time each sample took
    assert _records_without_timing(out) == _records_without_timing(uninterrupted)


def _records_without_timing(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "generations.jsonl").open()]
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_second_writer_is_refused_with_one_line(tmp_path, tiny_model_path):
    from filelock import FileLock

    out = tmp_path / "locked"
    out.mkdir()
    with FileLock(str(out / ".lock")):
        result = _run("tiny-kill.yaml", out)
    assert result.returncode == 2
    assert "another run is writing" in result.stderr and result.stderr.count("\n") == 1
