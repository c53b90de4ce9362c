"""A run folder's `.lock` is there while a run writes and gone on every exit: a finished run,
bad input found mid-run, a crash, a stop signal (SIGTERM through the real CLI). A folder the
run created that holds no file when it stops is removed: exit 2 leaves nothing written."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.errors import UserError
from harness.store import RunStore
from tests.chat_server import SUITE


def test_the_lock_is_gone_after_a_run_that_wrote_and_the_files_stay(tmp_path):
    out = tmp_path / "run"
    with RunStore(out) as store:
        assert (out / ".lock").exists()
        store.put("score", "k1", {"a": 1})
    assert not (out / ".lock").exists()
    assert store.get("score", "k1") == {"a": 1}


@pytest.mark.parametrize("error", [UserError("bad input"), RuntimeError("crash")])
def test_a_folder_the_run_created_and_left_empty_is_removed(tmp_path, error):
    out = tmp_path / "run"
    with pytest.raises(type(error)), RunStore(out):
        raise error
    assert not out.exists()


def test_an_existing_folder_stays_without_its_lock(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    with pytest.raises(UserError), RunStore(out):
        raise UserError("bad input")
    assert out.is_dir() and list(out.iterdir()) == []


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    out = tmp_path / "run"
    with RunStore(out) as first:
        first.put("score", "k", 1)
        with pytest.raises(UserError, match="another run is writing"), RunStore(out):
            pass
        assert (out / ".lock").exists()  # the refused one left the holder's lock alone
    assert not (out / ".lock").exists()


def test_sigterm_during_a_run_leaves_no_lock(tmp_path):
    """`harness run` on a chat endpoint that accepts connections and never answers: the run
    waits on its first requests; SIGTERM unwinds it (exit 143) and the lock goes with it."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections queue in the backlog, never accepted: no answer
    config = {
        "name": "lock", "models": ["stand-in"], "suites": [str(SUITE)], "policies": ["none"],
        "samples": 1, "scoring": {"window": 8}, "probe": {"enabled": False},
        "generation": {"engine": "chat", "max_tokens": 48, "turn_tokens": 12,
                       "base_url": f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
                       "chat": {"positions": "chars", "max_retries": 0, "timeout_s": 5}},
    }  # fmt: skip
    path, out = tmp_path / "run.yaml", tmp_path / "out"
    path.write_text(yaml.safe_dump(config))
    import harness

    env = {**os.environ, "PYTHONPATH": str(Path(harness.__file__).parents[1])}  # this tree
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(path), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (out / ".lock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (out / ".lock").exists(), run.stderr.read() if run.poll() is not None else ""
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
        silent.close()
    assert run.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted by SIGTERM" in stderr
    assert not (out / ".lock").exists()
