"""PieceCache (tokens.py: a GPT-2 byte-level BPE encoded a pre-token at a time, each distinct
pre-token by the backend once) against the backend tokenizer's own batch encode, on a realistic
log: natural multilingual text cut into chat-reply-sized pieces, each used once.

    .venv/bin/python bench/piece_cache.py [--replies 10000] [--batch 1250] [--repeats 3]

Text: the machine's own documentation in English, German, French, Spanish and Italian (Vim's
tutor and GnuPG's help text in each, the manual pages translated into each with their English
originals, macros stripped, Vim's English help files), split into sentences and
joined into replies of 1-8 consecutive sentences (20-1,200 characters), so words recur the way
they do across a log's replies while no reply repeats. Prints CPU seconds (process_time) of
each way over the whole log in batches of --batch texts (PieceCache from an empty cache, then
again holding the log's pre-tokens), the ratio, and checks that both give the same ids.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import time
from pathlib import Path

SOURCES = [
    *(f"/usr/share/vim/vim90/tutor/tutor.{lang}.utf-8" for lang in ("de", "fr", "es", "it")),
    "/usr/share/vim/vim90/tutor/tutor",
    *(f"/usr/share/gnupg/help.{lang}.txt" for lang in ("de", "fr", "es", "it")),
    "/usr/share/gnupg/help.txt",
    *sorted(str(p) for p in Path("/usr/share/vim/vim90/doc").glob("*.txt"))[:40],
    *(
        str(p)
        for lang in ("de", "fr", "es", "it")
        for p in sorted(Path(f"/usr/share/man/{lang}").rglob("*.gz"))
    ),
]
MAN_ENGLISH = Path("/usr/share/man")


def man_text(path: Path) -> str:
    """A manual page's prose: macro lines dropped, font escapes removed."""
    lines = gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines()
    prose = [line for line in lines if line and not line.startswith((".", "'"))]
    return re.sub(r"\\f[BIRP]|\\f\(..|\\-|\\\(..|\\&|\\", "", "\n".join(prose))


def sentences(path: Path) -> list[str]:
    if path.suffix == ".gz":
        text = man_text(path)
    else:
        text = path.read_text(encoding="utf-8", errors="replace")
    text = re.sub(r"[ \t]*\n[ \t]*", " ", text)  # paragraphs as a chat reply writes them
    parts = re.split(r"(?<=[.!?])\s+", text)
    return [p.strip() for p in parts if len(p.split()) >= 3 and len(p) < 400]


def realistic_log(replies: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    sources = [Path(src) for src in SOURCES]
    # each translated manual page's English original too
    sources += [MAN_ENGLISH / p.parent.name / p.name for p in sources if p.suffix == ".gz"]
    pool = [s for src in sources if src.is_file() for s in sentences(src)]
    out, i = [], 0
    while i < len(pool):
        n = rng.randint(1, 8)
        out.append(" ".join(pool[i : i + n]))
        i += n
    rng.shuffle(out)  # a smaller log is a sample of the same mix
    return out[:replies]


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replies", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1250)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from _limit import cpu_description
    from transformers import AutoTokenizer

    from harness import tokens
    from harness.models import resolve_model

    backend = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m-instruct").path)
    backend = backend.backend_tokenizer
    log = realistic_log(args.replies)
    batches = [log[i : i + args.batch] for i in range(0, len(log), args.batch)]
    cache = tokens.piece_cache(backend)
    split = sum(map(cache.splits, log))
    print(cpu_description())
    chars = sum(map(len, log))
    print(f"log: {len(log)} replies, {chars:,} characters, {split / len(log):.0%} split by "
          "PieceCache (the rest go to the backend whole)")  # fmt: skip

    def plain():
        return [ids for b in batches for ids in tokens._backend_many(backend, b)]

    def cached():
        return [ids for b in batches for ids in cache.encode_many(b)]

    assert plain() == cached(), "PieceCache gave other ids than the backend"
    times = {"backend": [], "cache empty": [], "cache full": []}
    for _ in range(args.repeats):  # interleaved: the machine's load falls on all alike
        times["backend"].append(cpu(plain))
        cache.ids.clear()
        times["cache empty"].append(cpu(cached))
        times["cache full"].append(cpu(cached))
    best = {k: min(v) for k, v in times.items()}
    for name, seconds in best.items():
        print(f"{name:<12} {seconds:6.3f} s CPU  backend / this = {best['backend'] / seconds:.2f}x")


if __name__ == "__main__":
    main()
