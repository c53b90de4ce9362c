"""Every command's error is one `error: ...` line ending in a newline, exit code 2, no
traceback; input files that are not UTF-8 text are such an error, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

DATA = Path(__file__).parent.parent / "data" / "configs"
TASKS = Path(__file__).parents[2] / "tasks"
# The start of a PNG file: what a user gets by passing the wrong file.
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff"


def assert_one_error_line(stderr: str, *expected: str) -> None:
    assert stderr.startswith("error: ") and stderr.endswith("\n"), repr(stderr)
    assert stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    for text in expected:
        assert text in stderr, stderr


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty current folder, so a default output folder (reports/...) would show up."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_run_config_that_is_not_utf8(workdir, run_cli):
    config = workdir / "garbage.yaml"
    config.write_bytes(BINARY)
    code, stdout, stderr = run_cli(["run", str(config)])
    assert code == 2 and stdout == ""
    assert_one_error_line(stderr, "garbage.yaml: not UTF-8 text")
    assert list(workdir.iterdir()) == [config]  # no reports/ folder, no output


def test_suite_that_is_not_utf8(workdir, run_cli):
    suite = workdir / "suite.yaml"
    suite.write_bytes("items: [{id: caf\u00e9}]\n".encode("latin-1"))  # a Latin-1 export
    config = yaml.safe_load((DATA / "valid.yaml").read_text())
    config["suites"] = [str(suite)]
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code, _, stderr = run_cli(["run", str(path), "--out", str(workdir / "out")])
    assert code == 2
    assert_one_error_line(stderr, "suite.yaml: not UTF-8 text (byte 0xe9")
    assert not (workdir / "out").exists()


def test_score_transcript_line_that_is_not_utf8(workdir, run_cli):
    logs = workdir / "logs.jsonl"
    good = json.dumps({"item": "fmt-nocomma-story", "text": "The raft drifted on."})
    logs.write_bytes(good.encode() + b"\n" + BINARY + b"\n")
    out = workdir / "out"
    argv = ["score", str(logs), "--suite", str(TASKS / "formats.yaml"), "--out", str(out)]
    code, _, stderr = run_cli(argv)
    assert code == 2
    assert_one_error_line(stderr, "logs.jsonl:2: not UTF-8 text")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--pairs", "--prompt-a"])
def test_probe_inputs_that_are_not_utf8(workdir, run_cli, flag):
    binary = workdir / "input.bin"
    binary.write_bytes(BINARY)
    prompts = ["--pairs", str(binary)]
    if flag == "--prompt-a":
        prompts = ["--prompt-a", f"@{binary}", "--prompt-b", "A dog."]
    out = workdir / "out"
    code, _, stderr = run_cli(
        ["probe", "--model", "tiny-random-llama", *prompts, "--continuation", "generate",
         "--tokens", "32", "--out", str(out)]
    )  # fmt: skip
    assert code == 2
    assert_one_error_line(stderr, "input.bin: not UTF-8 text")
    assert not out.exists()


def test_report_of_generations_that_are_not_utf8(workdir, run_cli):
    run = workdir / "run"
    run.mkdir()
    (run / "generations.jsonl").write_bytes(BINARY)
    code, _, stderr = run_cli(["report", str(run)])
    assert code == 2
    assert_one_error_line(stderr, "generations.jsonl:1: not UTF-8 text")
    assert [p.name for p in run.iterdir()] == ["generations.jsonl"]


def test_score_error_is_one_line_with_its_newline(workdir, run_cli):
    argv = ["score", "nothere.jsonl", "--suite", str(TASKS / "formats.yaml"), "--out", "o"]
    code, _, stderr = run_cli(argv)
    assert code == 2
    assert stderr == "error: nothere.jsonl: file not found\n"


def test_a_multiline_library_message_stays_one_line(workdir, run_cli, monkeypatch):
    # huggingface_hub's errors span lines; the CLI quotes them inside its own error line.
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("Got: ConnectError\nAn error happened while trying to locate the files")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    logs = workdir / "logs.jsonl"
    logs.write_text(json.dumps({"item": "fmt-nocomma-story", "text": "The raft."}) + "\n")
    argv = ["score", str(logs), "--suite", str(TASKS / "formats.yaml"), "--out", "o"]
    code, _, stderr = run_cli([*argv, "--model", "some-org/some-model"])
    assert code == 2
    assert_one_error_line(
        stderr, "model 'some-org/some-model'", "ConnectError An error happened while trying"
    )


def test_a_crash_exits_3_not_the_verdict_code_1(workdir, run_cli, monkeypatch):
    # exit 1 means "a gate failed or is undecided" (make demo accepts it as the quickstart's
    # verdict); a bug must never read as one.
    import harness.report

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(harness.report, "render_report", broken)
    (workdir / "manifest.json").write_text("{}")
    code, _, stderr = run_cli(["report", str(workdir)])
    assert code == 3
    assert "Traceback" in stderr and "KeyError: 'a bug'" in stderr
