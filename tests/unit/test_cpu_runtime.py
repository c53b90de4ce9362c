"""The vLLM CPU engine's preloads: found where setup puts them, kept out when absent or
turned off, never duplicated, the user's own LD_PRELOAD first."""

from __future__ import annotations

import pytest

from harness.engines import cpu_runtime
from harness.errors import UserError


@pytest.fixture
def libs(tmp_path, monkeypatch):
    system, venv = tmp_path / "system", tmp_path / "venv"
    system.mkdir(), venv.mkdir()
    (system / "libtcmalloc_minimal.so.4").write_bytes(b"")
    (venv / "libiomp5.so").write_bytes(b"")
    monkeypatch.setattr(cpu_runtime, "library_dirs", lambda: [venv, system])
    return system / "libtcmalloc_minimal.so.4", venv / "libiomp5.so"


def test_both_libraries_are_preloaded_after_the_users_own(libs):
    tcmalloc, iomp = libs
    env = {"LD_PRELOAD": "/opt/mine.so"}
    runtime = cpu_runtime.configure_cpu_runtime(env)
    assert env["LD_PRELOAD"] == f"/opt/mine.so:{tcmalloc}:{iomp}"
    assert runtime["preloaded"] == {"tcmalloc": str(tcmalloc), "iomp": str(iomp)}
    assert runtime["missing"] == []
    cpu_runtime.configure_cpu_runtime(env)  # a second engine start adds nothing twice
    assert env["LD_PRELOAD"] == f"/opt/mine.so:{tcmalloc}:{iomp}"


def test_a_library_already_preloaded_by_the_user_is_not_added_again(libs):
    env = {"LD_PRELOAD": "/usr/local/lib/libtcmalloc_minimal.so.4"}
    cpu_runtime.configure_cpu_runtime(env)
    assert env["LD_PRELOAD"].count("libtcmalloc_minimal") == 1


def test_choice_and_absence(libs, tmp_path, monkeypatch):
    env = {"HARNESS_CPU_PRELOAD": "none"}
    assert cpu_runtime.configure_cpu_runtime(env)["preloaded"] == {}
    assert "LD_PRELOAD" not in env
    env = {"HARNESS_CPU_PRELOAD": "iomp"}
    assert list(cpu_runtime.configure_cpu_runtime(env)["preloaded"]) == ["iomp"]
    monkeypatch.setattr(cpu_runtime, "library_dirs", lambda: [tmp_path / "empty"])
    env = {}
    runtime = cpu_runtime.configure_cpu_runtime(env)
    assert runtime["missing"] == ["tcmalloc", "iomp"] and "LD_PRELOAD" not in env


def test_an_unknown_library_name_is_one_clear_error():
    with pytest.raises(UserError, match="HARNESS_CPU_PRELOAD: unknown library 'jemalloc'"):
        cpu_runtime.configure_cpu_runtime({"HARNESS_CPU_PRELOAD": "tcmalloc,jemalloc"})
