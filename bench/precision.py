"""float32 vs a reduced dtype on the probe's own code path: alpha per layer, the measured
rounding floor per layer, and the positions the floor removes from the fit.

    .venv/bin/python bench/precision.py [--tokens 4096] [--dtype bfloat16] [--layers 1,5,15,30]
                                        [--save DIR] [--load DIR]

The pair: system prompt "Always answer in French." against none, user "Tell me a long story
about a lighthouse keeper." (configs/paper.yaml's fr-vs-none), over a natural-text
continuation: the first --tokens tokens of the GNU GPL v3 text (/usr/share/common-licenses/
GPL-3, English prose, on every Debian machine), tokenised alone (never jointly with a prompt).
Both dtypes run `HfBackend.curves` (the hf probe backend, whole-sequence forward, every
hidden state), the reduced one measuring its floor against a float32 copy
(`harness.probes.floor`). Fits: `fit_alpha` on rel_l2 at the usual 64 log-spaced positions
from t_min = 16; for the reduced dtype over the positions above FLOOR_MULTIPLE x floor
(`precision.resolved`), beside float32 over those same positions and over all of them.
--save DIR keeps both curve sets (.npz) so --load DIR re-analyses without recomputing.
On CPUs without bf16 units (AVX2) bf16 matmuls are slow: CPU seconds are printed per dtype.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _limit import cpu_description

from harness.analysis.powerlaw import fit_alpha, fit_positions
from harness.probes.precision import (
    FLOOR_MULTIPLE,
    MIN_KEPT_DECADES,
    hidden_below_floor,
    resolved,
)

TEXT = Path("/usr/share/common-licenses/GPL-3")
SYSTEM_A, USER = "Always answer in French.", "Tell me a long story about a lighthouse keeper."


# more pairs (--pairs N, for the laws' verdicts, which need >= 3 units): configs/paper.yaml's
EXTRA_PAIRS = [
    ("Always answer in French.", "Always answer in German.", "Explain how bread is made."),
    ("You are a pirate captain. Speak like one.", "You are a careful corporate lawyer.",
     "Tell me about the most important decision of your career."),
    ("Write everything in lowercase letters only.", None, "Write a report on the bicycle."),
]  # fmt: skip


def pair_ids(path: Path, tokens: int, index: int = 0) -> tuple[list[int], list[int], list[int]]:
    from transformers import AutoTokenizer

    from harness.text.chat import ChatFormat

    tokenizer = AutoTokenizer.from_pretrained(path)
    chat = ChatFormat(tokenizer)
    system_a, system_b, user = ([(SYSTEM_A, None, USER), *EXTRA_PAIRS])[index]
    ids_a, ids_b = chat.prompt_ids(system_a, user), chat.prompt_ids(system_b, user)
    # the file's line breaks are layout only; without it (a minimal image): this repo's docs
    source = [TEXT] if TEXT.exists() else sorted(Path(__file__).parents[1].glob("docs/*.md"))
    text = " ".join(" ".join(p.read_text().split()) for p in source)
    continuation = tokenizer(text, add_special_tokens=False)["input_ids"][:tokens]
    if len(continuation) < tokens:
        raise SystemExit(f"{source} give only {len(continuation)} tokens")
    return ids_a, ids_b, continuation


def compute(path: Path, tokens: int, dtype: str, save: Path, pairs: int = 1) -> None:
    import resource

    from harness.probes.backend import HfBackend

    for name in ("float32", dtype):
        backend = HfBackend(path, dtype=name)
        for index in range(pairs):
            file = save / f"{name}{f'-{index}' if index else ''}.npz"
            if file.exists():  # kept from an earlier run of the same --save
                continue
            ids_a, ids_b, cont = pair_ids(path, tokens, index)
            backend.model()  # loaded before the clock starts
            if name != "float32":
                backend.reference()
            wall, cpu = time.perf_counter(), time.process_time()
            result = backend.curves(ids_a, ids_b, cont)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
            print(f"{name} pair {index}: T={tokens}, {wall:.0f} s wall, {cpu:.0f} s CPU "
                  f"(user+sys of this process), peak RSS {rss} MB", flush=True)  # fmt: skip
            np.savez(file, **result.to_arrays())
        backend.close()


def verdicts(load: Path, dtype: str, t_min: int) -> None:
    """laws.csv's verdicts per layer group over the saved pairs (>= 3 needed): float32, the
    reduced dtype as computed, and the reduced dtype with its floor applied (the harness)."""
    from types import SimpleNamespace

    from harness.analysis.law_sets import group_sets, pair_units
    from harness.analysis.law_table import law_rows
    from harness.probes.precision import FLOOR_KEYS

    files = sorted(load.glob("float32*.npz"))
    if len(files) < 3:
        return
    record = SimpleNamespace(item="i", policy="none", is_conversation=False)
    table = {}
    for label in ("float32", f"{dtype} raw", f"{dtype} kept"):
        units = []
        for file in files:
            name = file.name.replace("float32", dtype) if label != "float32" else file.name
            arrays = dict(np.load(load / name))
            if label.endswith("raw"):
                arrays = {k: v for k, v in arrays.items() if k not in FLOOR_KEYS}
            units += pair_units("m", record, arrays, t_min)
        rows = law_rows(group_sets(units, t_min), draws=200)
        for r in rows:
            if r["chosen"] and r["item"] == "i":
                table.setdefault((r["curve"], r["layer_group"]), {})[label] = r["verdict"]
    print(f"laws verdicts over {len(files)} pairs (chosen law per curve):")
    for (curve, group), by in sorted(table.items()):
        print(f"  {curve} {group}: " + ", ".join(f"{k}: {v}" for k, v in by.items()))


def report(load: Path, dtype: str, layers: list[int], t_min: int) -> None:
    ref = dict(np.load(load / "float32.npz"))
    low = dict(np.load(load / f"{dtype}.npz"))
    kept = resolved(low, t_min)  # what the harness fits: the cut, and too-short curves dropped
    below = hidden_below_floor(low)
    total = ref["rel_l2"].shape[1]
    t = np.arange(1, total + 1)
    grid = fit_positions(t_min, total)
    rows = list(np.asarray(ref["layers"]).tolist())
    print(f"T = {total}, fit positions {len(grid)} (t_min {t_min}), floor multiple "
          f"{FLOOR_MULTIPLE}, floor span {min(256, total)}, a cut curve needs "
          f">= {MIN_KEPT_DECADES} decade of t kept")  # fmt: skip
    print(
        f"| layer | alpha float32 [95% CI] | alpha {dtype} raw | alpha {dtype} kept [95% CI] | "
        f"alpha float32 same positions [95% CI] | kept alpha in that CI | floor rel_l2 | "
        f"late error | removed / {len(grid)} | kept t range | rel_l2 f32 / {dtype} at T |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    late = slice(3 * total // 4, total)  # the last quarter: does the span's floor hold there?
    for layer in layers:
        i = rows.index(layer)
        f32 = fit_alpha(t, ref["rel_l2"][i], t_min=t_min)
        raw = fit_alpha(t, low["rel_l2"][i], t_min=t_min)
        mine = fit_alpha(t, kept["rel_l2"][i], t_min=t_min)
        same = fit_alpha(t, np.where(below[i], np.nan, ref["rel_l2"][i]), t_min=t_min)
        removed = int(below[i, grid - 1].sum())
        keep_t = grid[~below[i, grid - 1]]
        span = f"{keep_t.min()}-{keep_t.max()}" if keep_t.size else "none"
        if np.isfinite(mine.alpha):
            inside = "yes" if same.ci_low <= mine.alpha <= same.ci_high else "NO"
        else:
            inside = "cannot tell (no alpha)"

        def ci(f) -> str:
            if not np.isfinite(f.alpha):
                return f"none ({f.n_points} pos.)"
            return f"{f.alpha:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}]"

        print(f"| {layer} | {ci(f32)} | {raw.alpha:.2f} | {ci(mine)} | {ci(same)} | {inside} | "
              f"{float(low['floor_rel_l2'][i]):.2e} | "
              f"{np.quantile(np.abs(low['rel_l2'][i, late] - ref['rel_l2'][i, late]), 0.9):.2e} | "
              f"{removed} | {span} | "
              f"{ref['rel_l2'][i, -1]:.1e} / {low['rel_l2'][i, -1]:.1e} |")  # fmt: skip
    for metric in ("kl", "delta_logp"):
        floor = float(low[f"floor_{metric}"])
        gone = int(np.isnan(kept[metric][grid - 1]).sum())
        print(f"{metric}: floor {floor:.2e}, {gone}/{len(grid)} fit positions left out")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--layers", default="1,5,15,30")
    parser.add_argument("--t-min", type=int, default=16)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--load", type=Path, default=None)
    parser.add_argument("--pairs", type=int, default=1, help="pairs probed (>= 3: verdicts)")
    args = parser.parse_args()
    print(cpu_description())
    folder = args.load
    if folder is None:
        from harness.models import resolve_model

        folder = args.save or Path("/tmp/bench-precision")
        folder.mkdir(parents=True, exist_ok=True)
        path = resolve_model("smollm2-135m-instruct").path
        compute(path, args.tokens, args.dtype, folder, args.pairs)
    layers = [int(x) for x in args.layers.split(",")]
    report(folder, args.dtype, layers, args.t_min)
    verdicts(folder, args.dtype, args.t_min)


if __name__ == "__main__":
    main()
