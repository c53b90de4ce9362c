"""`harness probe` as a user runs it: the files, the table, the lam sweep, and bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from harness.results import PROBE_FILES

# whole runs (the module's fixtures count against its first test's limit)
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

TEXT = "The river ran past the old mill, and the children counted the boats going by. " * 12


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe-inputs")
    (folder / "cont.txt").write_text(TEXT)
    (folder / "short.txt").write_text("Too short.")
    (folder / "pairs.yaml").write_text(
        "pairs:\n"
        "  - {name: chat, system_a: 'Always answer in French.', system_b: ':none', user: Hi}\n"
        "  - {name: raw, prompt_a: 'A story about cats.', prompt_b: 'A recipe for soup.'}\n"
    )
    return folder


def test_probe_writes_tables_for_both_models_and_lams(inputs, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "probe",
            "--model",
            "tiny-random-llama",
            "--pairs",
            str(inputs / "pairs.yaml"),
            "--continuation",
            f"@{inputs / 'cont.txt'}",
            "--tokens",
            "120",
            "--layers",
            "0,2,4",
            "--compare",
            "untrained",
            "--attention-bias",
            "0,1",
            "--out",
            str(out),
            "--n-boot",
            "50",
            "--chunk",
            "50",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "alpha of l2 by layer (pooled over pairs)" in proc.stdout
    head = proc.stdout.split("┡")[0]  # a column per model and policy, the policy below
    assert head.count("untrained:tiny-random-llama") == 2 and head.count("attention_bias-1") == 2
    assert "lam=" not in proc.stdout  # the lam sweep shows as policies
    # a run's own files: its row models' columns, each pair a record (item = its name, policy
    # = the run's label of the attention-bias policy, sample 0), every t of the reply
    files = {name: pd.read_csv(out / name) for name in PROBE_FILES}
    for name, row in PROBE_FILES.items():
        assert list(files[name].columns) == row.columns(), name
    div = files["divergence.csv"]
    # 2 models x 2 lams x 2 pairs x 3 layers x 120 positions
    assert len(div) == 2 * 2 * 2 * 3 * 120 and set(div.t_unit) == {"tokens"}
    assert set(div.model) == {"tiny-random-llama", "untrained:tiny-random-llama"}
    assert set(div.item) == {"chat", "raw"} and set(div["sample"]) == {0}
    assert set(div.policy) == {"attention_bias-0", "attention_bias-1"}
    assert set(div.pair) == {f"{i}/{p}/0" for i in div.item.unique() for p in div.policy.unique()}
    assert set(div.turn) == {1} and set(div.role) == {"assistant"}
    assert (div[div.layer == 0].l2 == 0).all() and (div[div.layer == 4].l2 > 0).all()
    nxt = files["nexttoken.csv"]
    assert len(nxt) == 2 * 2 * 2 * 120 and (nxt.kl >= 0).all()
    assert (nxt.kl_low == nxt.kl).all() and (nxt.kl_high == nxt.kl).all()  # exact on hf
    assert set(nxt.backend) == {"hf"}
    fits = files["fits.csv"]
    assert set(fits.item) == {"chat", "raw", "all"}
    assert set(fits[fits.item != "all"].pair) == set(div.pair)
    pooled = fits[fits.pair == "all"][["model", "item", "policy"]].drop_duplicates()
    # each policy's pairs pooled (the sweep), then each model whole, as a run pools one
    assert sorted(map(tuple, pooled.values)) == sorted(
        (m, "all", p)
        for m in div.model.unique()
        for p in ("attention_bias-0", "attention_bias-1", "all")
    )
    good = fits[(fits.layer == 4) & (fits.metric == "l2")]
    assert good.alpha.notna().all() and (good.t_max == 120).all()
    assert fits[fits.layer == 0].alpha.isna().all()
    # lam changes the curves of the biased run, and lam = 0 is the plain model
    l4 = div[(div.layer == 4) & (div.model == "tiny-random-llama")]
    plain, biased = (l4[l4.policy == p].l2.reset_index(drop=True) for p in (
        "attention_bias-0", "attention_bias-1"))  # fmt: skip
    assert not plain.equals(biased)
    att = files["attention.csv"]  # layers 2 and 4 of the kept 0, 2, 4
    assert len(att) == 2 * 2 * 2 * 2 * 120 and set(att.layer) == {2, 4}
    trained = att[(att.model == "tiny-random-llama") & (att.t == 120)]
    shares = trained.groupby("policy").share_prompt_mean.mean()
    assert shares["attention_bias-1"] > shares["attention_bias-0"]  # the bias holds the share up
    rows = [json.loads(line) for line in (out / "continuations.jsonl").read_text().splitlines()]
    assert [r["pair"] for r in rows] == ["chat", "raw"] and len(rows[0]["continuation_ids"]) == 120
    # `harness report DIR` reads the probe folder as a run's: its mechanism sections are drawn
    report = subprocess.run([sys.executable, "-m", "harness", "report", str(out)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "is not usable" not in page
    for figure in ("fig-divergence", "fig-alpha", "fig-attention-share"):
        assert f'id="{figure}"' in page, figure


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--continuation", "@{short}", "--tokens", "64"], "fewer than t_min = 16"),
        (["--layers", "0,9"], "out of range: this model has 0..4"),
        (["--tokens", "8"], "shorter than --t-min 16"),
        (["--attention-bias", "0,x"], "--attention-bias must be comma-separated numbers"),
        (["--prompt-a", "", "--prompt-b", "x"], "empty prompt"),
        (["--prompt-a", "@{long}", "--prompt-b", "x"], "exceeds the model's context of 4096"),
    ],
)
def test_bad_input_is_one_line_exit_2(inputs, tmp_path, run_cli, extra, message):
    (tmp_path / "long.txt").write_text("word " * 5000)
    base = {"--prompt-a": "A cat.", "--prompt-b": "A dog.", "--continuation": "@{cont}",
            "--tokens": "64", "--layers": "all"}  # fmt: skip
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        base[flag] = value
    paths = {
        "short": inputs / "short.txt",
        "cont": inputs / "cont.txt",
        "long": tmp_path / "long.txt",
    }
    args = [part.format(**paths) for kv in base.items() for part in kv]
    out = tmp_path / "out"
    code, _, err = run_cli(["probe", "--model", "tiny-random-llama", *args, "--out", str(out)])
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert not out.exists()  # nothing half-written


def test_identical_prompts_give_reasoned_nan(inputs, tmp_path, run_cli):
    out = tmp_path / "same"
    code, _, err = run_cli([
        "probe", "--model", "tiny-random-llama", "--prompt-a", "Same.",
        "--prompt-b", "Same.", "--continuation", f"@{inputs / 'cont.txt'}", "--tokens", "40",
        "--layers", "1,4", "--out", str(out), "--n-boot", "20",
    ])  # fmt: skip
    assert code == 0, err
    fits = pd.read_csv(out / "fits.csv")
    # the prompt's attention share is a property of one prompt: it decays, and is fitted,
    # whether or not the two arms differ; every divergence fit is NaN with its reason
    share = fits.metric == "share_prompt_mean"
    assert share.any() and fits[share].alpha.map(math.isfinite).all()
    divergence = fits[~share]
    assert len(divergence) and divergence.alpha.map(math.isnan).all()
    assert set(divergence.reason) == {"identical prompts"}


def test_generated_continuation_is_shared_with_the_untrained_twin(tmp_path):
    """`--continuation generate` as a user runs it: sampled on vLLM (the default generator),
    exactly --tokens long, and the same ids probed under both models."""
    out = tmp_path / "gen"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "probe", "--model", "tiny-random-llama",
         "--system-a", "Be brief.", "--system-b", ":default", "--user", "Hi",
         "--continuation", "generate", "--tokens", "48", "--t-min", "4", "--layers", "4",
         "--compare", "untrained", "--out", str(out), "--n-boot", "20"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "generating 48 tokens for 1 pair(s) on vLLM" in proc.stderr
    (row,) = [json.loads(line) for line in (out / "continuations.jsonl").read_text().splitlines()]
    assert row["pair"] == "cli" and len(row["continuation_ids"]) == 48
    nxt = pd.read_csv(out / "nexttoken.csv")
    assert nxt.groupby("model").t.max().to_dict() == {
        "tiny-random-llama": 48, "untrained:tiny-random-llama": 48,
    }  # fmt: skip


def test_killed_probe_resumes_from_its_units(inputs, tmp_path, monkeypatch, run_cli):
    """A probe that dies on its third curve set keeps the two finished ones; the re-run computes
    only the rest and writes exactly the files of an uninterrupted run."""
    import harness.probes.divergence as divergence

    args = ["probe", "--model", "tiny-random-llama", "--pairs", str(inputs / "pairs.yaml"),
            "--continuation", "generate", "--generator", "hf", "--tokens", "40", "--layers", "2,4",
            "--attention-bias", "0,1", "--n-boot", "20"]  # fmt: skip
    code, _, err = run_cli([*args, "--out", str(tmp_path / "whole")])
    assert code == 0, err

    real, calls = divergence.pair_divergence, []

    def dies_on_third(*a, **k):
        calls.append(a)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a user's Ctrl-C mid-probe
        return real(*a, **k)

    monkeypatch.setattr(divergence, "pair_divergence", dies_on_third)
    out = tmp_path / "resumed"
    code, _, err = run_cli([*args, "--out", str(out)])
    assert code == 130  # Ctrl-C: exit 128 + SIGINT
    units = sorted((out / "cache" / "probe-cli").glob("*.npz"))
    assert len(units) == 2 and not (out / "fits.csv").exists()
    calls.clear()
    code, _, err = run_cli([*args, "--out", str(out)])
    assert code == 0, err
    assert len(calls) == 2  # 2 lams x 2 pairs = 4 curve sets, 2 of them from the cache
    for name in ("divergence.csv", "nexttoken.csv", "attention.csv", "fits.csv",
                 "continuations.jsonl"):  # fmt: skip
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
