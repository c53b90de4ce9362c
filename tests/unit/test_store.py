"""RunStore: content keys, atomic units, resume, the single-writer lock."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import UserError
from harness.store import RunStore, content_key, get_arrays, put_arrays


def test_content_key_is_stable_and_sensitive():
    a = content_key("probe", {"b": 1, "a": [1, 2]}, "m")
    assert a == content_key("probe", {"a": [1, 2], "b": 1}, "m")  # key order does not matter
    assert a != content_key("probe", {"a": [1, 2], "b": 2}, "m")
    assert a != content_key("score", {"a": [1, 2], "b": 1}, "m")  # stages are namespaced


def test_units_round_trip_and_survive_a_new_store(tmp_path):
    with RunStore(tmp_path / "run") as store:
        store.put("generate", "k1", [{"x": 1}])
        put_arrays(store, "probe", "k2", {"curve": np.arange(5.0)})
        assert store.has("generate", "k1") and not store.has("generate", "k3")
    with RunStore(tmp_path / "run") as store:  # a resumed run sees the units
        assert store.get("generate", "k1") == [{"x": 1}]
        np.testing.assert_array_equal(get_arrays(store, "probe", "k2")["curve"], np.arange(5.0))
    with RunStore(tmp_path / "run", fresh=True) as store:  # --fresh forgets them
        assert store.get("generate", "k1") is None


def test_leftover_temp_files_are_removed_on_resume(tmp_path):
    with RunStore(tmp_path / "run") as store:
        store.put("score", "k", [])
    stale = tmp_path / "run" / "cache" / "score" / ".k.json.abc.tmp"
    stale.write_text("half a unit")
    with RunStore(tmp_path / "run"):
        assert not stale.exists()


def test_second_writer_is_refused(tmp_path):
    with RunStore(tmp_path / "run"), pytest.raises(UserError, match="another run is writing"):
        RunStore(tmp_path / "run").__enter__()
