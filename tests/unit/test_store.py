"""RunStore: content keys, atomic units, resume, the single-writer lock."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import UserError
from harness.store import STAGE_VERSIONS, RunStore, get_arrays, put_arrays, unit_key


def test_unit_key_is_stable_and_sensitive(monkeypatch):
    def key(stage="probe", model="m", inputs=(1, 2), params=None) -> str:
        return unit_key(stage, model=model, inputs=list(inputs), params=params or {"b": 1, "a": 2})

    a = key()
    assert len(a) == 32 and a == key(params={"a": 2, "b": 1})  # key order does not matter
    assert a != key(params={"a": 2, "b": 2})
    assert a != key(inputs=(2, 1)) and a != key(model="m2")
    assert a != key(stage="score")  # stages are namespaced
    # a part moved between inputs and params is another unit: the shape is part of the key
    assert key(inputs=[], params={"x": [1, 2]}) != key(inputs=[1, 2], params={"x": []})
    monkeypatch.setitem(STAGE_VERSIONS, "probe", STAGE_VERSIONS["probe"] + 1)
    assert key() != a  # a bumped stage version recomputes its units


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


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    from harness.atomic import atomic_write_bytes, atomic_write_text

    path = tmp_path / "deep" / "folder" / "out.csv"
    atomic_write_text(path, "a,b\r\n1,2\n")
    assert path.read_bytes() == b"a,b\r\n1,2\n"  # line endings as given, parents created
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in path.parent.iterdir()] == ["out.csv"]


def test_atomic_write_that_fails_keeps_the_old_file(tmp_path):
    from harness.atomic import atomic_write_bytes

    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # fails mid-write
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_csv_written_a_chunk_at_a_time_is_the_whole_string_s_bytes(tmp_path):
    # write_csv streams through atomic_open: the bytes of the one-string write it replaced
    # (line endings, UTF-8, quoting, the float format), and a failure mid-frame keeps the old file
    import numpy as np
    import pandas as pd

    from harness.atomic import atomic_open
    from harness.store import write_csv

    rows = 25_000  # several of pandas' write chunks
    frame = pd.DataFrame(
        {
            "x": np.linspace(0, 1, rows) / 3,
            "s": ['é, "q"\r\nz', None] * (rows // 2) + ["t"] * (rows % 2),
        }
    )
    path = tmp_path / "w.csv"
    write_csv(frame, path)
    assert path.read_bytes() == frame.to_csv(index=False, float_format="%.9g").encode("utf-8")
    with pytest.raises(RuntimeError), atomic_open(path) as handle:
        handle.write("partial")
        raise RuntimeError("killed mid-write")
    assert path.read_bytes().startswith(b"x,s") and [p.name for p in tmp_path.iterdir()] == [
        "w.csv"
    ]


def test_atomic_folder_appears_whole_or_not_at_all(tmp_path):
    from harness.atomic import atomic_folder

    dest = tmp_path / "model"
    with pytest.raises(RuntimeError), atomic_folder(dest) as tmp:
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("killed mid-build")
    assert list(tmp_path.iterdir()) == []
    with atomic_folder(dest) as tmp:
        (tmp / "config.json").write_text("{}")
        assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (dest / "config.json").read_text() == "{}"
    with pytest.raises(OSError), atomic_folder(dest) as tmp:  # another process made it first
        (tmp / "other.json").write_text("{}")
    assert [p.name for p in dest.iterdir()] == ["config.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
