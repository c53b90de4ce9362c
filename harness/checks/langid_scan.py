"""py3langid's scores with its byte scanner's walk done for a whole batch at once: exact.

py3langid counts the byte n-gram features of a text by walking an Aho-Corasick automaton over
its UTF-8 bytes, one Python step per byte (`py3langid.langid.visit_counts`: two thirds of its
time per text). The automaton's state after a byte is the node of the longest suffix of the bytes
read that is a prefix of a feature, so it depends on the last `depth` bytes only (`depth`: the
deepest node, measured when the scanner is built). The state after every byte of every text of
a batch is therefore the walk from the start state over that byte and the `depth - 1` before
it: `depth` vectorised steps over the batch's bytes, the texts joined with `depth - 1` bytes
0xFF between them, a byte that UTF-8 never holds and that sends every state back to the start
(`pad_resets`), so a text's first bytes see the start state before them, as in py3langid.

Each text's features are then counted and put in the order of their first occurrence, as
`Counter` does over the walk (one sort of the chunk's (text, feature, position) keys), and the
naive-Bayes dot product adds the same float32 terms in the same order (the float16 table cast
to float32 once: the cast is exact and is the one the product does). The chunk's texts with as
many features each are multiplied in one stacked `np.matmul`, whose loop makes for each text the
call a text's own 1-D @ 2-D product makes (OpenBLAS's gemv on the same operands, the same
sizes and strides; numpy's own loop for one feature): the same sums. `rank` is then py3langid's
own code on these scores; `probabilities_many` normalises a chunk's scores as one array, the
same float32 operations per text as py3langid's `_decide`. Both return exactly py3langid's
values (tests/unit/test_langid_scan.py compares them; so did the 121,539 texts that
bench/scoring.py's 10,000-conversation log has scored).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np
from py3langid.langid import LanguageIdentifier

# Bytes of text walked at once (~60 bytes of arrays a byte: ~30 MiB at the most, measured).
CHUNK_BYTES = 512 * 1024
# The packaged model's deepest scanner state is 6 bytes deep (`scanner_depth`, 1.5 s to walk
# over its 104,583 states, so measured by tests/unit/test_langid_scan.py, not at each start).
SCANNER_DEPTH = 6
PAD = 0xFF  # never in UTF-8 (nor in py3langid's `surrogatepass` encoding)
LOG1P_ONE = np.log1p(np.ones(1, dtype=np.float32))[0]  # float32 log1p(1), as numpy computes it


def scanner_depth(identifier: LanguageIdentifier) -> int:
    """The deepest state of the scanner: its shortest path from the start state (an
    Aho-Corasick node's depth; every transition deepens a node by at most one)."""
    depth = {0: 0}
    queue = deque([0])
    moves, rowbase = identifier.tk_nextmove, identifier._rowbase
    while queue:
        state = queue.popleft()
        base = rowbase[state]
        for byte in range(256):
            nxt = moves[base + byte]
            if nxt not in depth:
                depth[nxt] = depth[state] + 1
                queue.append(nxt)
    return max(depth.values())


class BatchIdentifier(LanguageIdentifier):
    """A LanguageIdentifier whose feature counts come from one vectorised walk per batch (see
    the module docstring): `probabilities_many` scores a batch, py3langid's own `rank` one
    text (its `_decide` on the walk's counts); `from_model_file` and `set_languages` are
    py3langid's."""

    __slots__ = ("_moves", "_np_rowbase", "_np_output", "_pair_base", "_table")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        moves = self.tk_nextmove  # py3langid's array.array of the rows of transitions
        self._moves = np.frombuffer(moves, dtype=f"u{moves.itemsize}")
        self._np_rowbase = np.asarray(self._rowbase, dtype=np.int64)
        self._np_output = np.asarray(self.tk_output, dtype=np.int32)
        if not self.pad_resets():
            raise ValueError("py3langid's scanner has features with byte 0xFF: cannot batch")
        # the row of the state after each pair of bytes from the start, at (first << 8) | second
        # (512 KiB): the walk's first two steps in one look-up
        after_one = self._moves[self._np_rowbase[0] + np.arange(256)]
        after_two = self._moves[self._np_rowbase[after_one][:, None] + np.arange(256)]
        self._pair_base = self._np_rowbase[after_two].ravel()
        self._table: np.ndarray | None = None

    def pad_resets(self) -> bool:
        """Byte 0xFF sends every state to the start state, which has no feature."""
        return bool((self._moves[PAD::256] == 0).all()) and self._np_output[0] < 0

    def set_languages(self, langs=None):
        super().set_languages(langs)
        self._table = None  # the float32 table of the new columns, cast at first use

    def probabilities_many(self, texts: Sequence[str]) -> list[dict[str, float]]:
        """`dict(self.rank(text))` of each text (py3langid's normalised probabilities; needs
        `norm_probs`): a chunk of texts walked at once, its scores normalised as one array."""
        if not self._norm_probs:
            raise ValueError("probabilities_many needs norm_probs=True")
        out: list[dict[str, float]] = []
        start = 0
        while start < len(texts):
            datas, size = [], 0
            while start + len(datas) < len(texts) and (not datas or size < CHUNK_BYTES):
                datas.append(self._encode(texts[start + len(datas)]))
                size += len(datas[-1])
            out += self._normalised(datas)
            start += len(datas)
        return out

    def _normalised(self, datas: list[bytes]) -> list[dict[str, float]]:
        """py3langid's `_decide` and `rank` of encoded texts, row by row of one array: the same
        float32 operations on the same operands per text (a row's max and sum reduce it as
        they reduce a text's own array; numpy's float32 `exp` is one algorithm for every
        element), so the same values (tests/unit/test_langid_scan.py compares them)."""
        scores = self._scores(datas)
        factors = [1.0 / math.sqrt(len(data) or 1) for data in datas]
        scores *= np.array(factors).astype(np.float32)[:, None]  # as a float32 scalar each
        np.exp(scores - scores.max(axis=1, keepdims=True), out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        for i, j in self._alias_pairs:
            scores[:, i] += scores[:, j]
            scores[:, j] = 0.0
        classes = self.nb_classes
        if not self._alias_pairs:
            # a row has one score per class by construction: strict's end check costs 1/4
            return [dict(zip(classes, row, strict=False)) for row in scores.tolist()]
        out = []
        for row in scores.tolist():
            merged: dict[str, float] = {}
            for lang, score in zip(classes, row, strict=True):
                merged.setdefault(lang, score)  # the first column holds the merged score
            out.append(merged)
        return out

    def _raw_score(self, text):
        """py3langid's `_raw_score` of one encoded text (its `_decide` and `rank` call it)."""
        return self._scores([text])[0]

    def _scores(self, datas: Sequence[bytes]) -> np.ndarray:
        """py3langid's `_raw_score` of each encoded text (float32 scores per class, a row a
        text). Its `_sparse_score` is `np.log1p(counts) @ table[features] + nb_pc`: here one
        stacked matmul per number of features (see the module docstring), a chunk's table rows
        gathered at once (a Python call a text cost more than its product)."""
        features, counts, bounds = self._grouped(datas)
        if self._table is None:
            # a feature's row as one item: `take` copies it whole (faster than rows by index)
            table = np.ascontiguousarray(self.nb_ptc, dtype=np.float32)
            self._table = table.view(np.dtype((np.void, table.strides[0]))).ravel()
        classes = self._table.itemsize // 4
        scores = np.empty((len(datas), classes), dtype=np.float32)
        scores[:] = super()._raw_score(b"")  # py3langid's own value for a featureless text
        sizes = np.diff(bounds)
        order = np.flatnonzero(sizes)
        if not order.size:
            return scores
        order = order[np.argsort(sizes[order], kind="stable")]
        sizes = sizes[order]
        # the texts' features, the texts ordered by their number of features: texts with as many
        # features each are `(texts, 1, k) @ (texts, k, classes)`
        runs = np.cumsum(sizes) - sizes
        take = np.arange(len(features)) + np.repeat(bounds[order] - runs, sizes)
        counts = counts[take]
        # np.log1p(counts), each count's own float32 log1p: most counts are 1
        weights = np.full(len(counts), LOG1P_ONE, dtype=np.float32)
        many = np.flatnonzero(counts > 1)
        weights[many] = np.log1p(counts[many])
        rows = self._table.take(features[take]).view(np.float32).reshape(-1, classes)
        out = np.empty((len(order), 1, classes), dtype=np.float32)
        edges = np.flatnonzero(np.r_[True, sizes[1:] != sizes[:-1], True]).tolist()
        runs, sizes = runs.tolist(), sizes.tolist()
        for a, b in zip(edges[:-1], edges[1:], strict=False):
            n, k, lo = b - a, sizes[a], runs[a]
            x, table = weights[lo : lo + n * k], rows[lo : lo + n * k]
            np.matmul(x.reshape(n, 1, k), table.reshape(n, k, classes), out=out[a:b])
        scores[order] = out[:, 0] + self.nb_pc
        return scores

    def feature_counts(self, datas: Sequence[bytes]) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """Per encoded text, py3langid's `visit_counts` as arrays: the features in the order of
        their first occurrence and their counts (float32); None for a text without features."""
        features, counts, bounds = self._grouped(datas)
        bounds = bounds.tolist()
        return [
            (features[a:b], counts[a:b]) if b > a else None
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]

    def _walk(self, stream: np.ndarray, size: int) -> np.ndarray:
        """The scanner's state after each of `size` bytes, from the `SCANNER_DEPTH - 1` before it
        (`stream[p : p + SCANNER_DEPTH]` is byte p and its context)."""
        pairs = (stream[:size].astype(np.intp) << 8) | stream[1 : 1 + size]
        base = self._pair_base.take(pairs)
        for step in range(2, SCANNER_DEPTH - 1):
            base += stream[step : step + size]
            base = self._np_rowbase.take(self._moves.take(base))
        base += stream[SCANNER_DEPTH - 1 : SCANNER_DEPTH - 1 + size]
        return self._moves.take(base)

    def _grouped(self, datas: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`feature_counts` flat: the features of every text, text after text, their counts,
        and where each text's start (text i's are `bounds[i]:bounds[i + 1]`)."""
        if not datas:
            return np.zeros(0, np.intp), np.zeros(0, np.float32), np.zeros(1, np.intp)
        context = SCANNER_DEPTH - 1
        pad = bytes([PAD]) * context
        stream = np.frombuffer(pad + pad.join(datas), dtype=np.uint8)
        size = len(stream) - context
        found = self._np_output[self._walk(stream, size)]
        where = np.flatnonzero(found >= 0)
        # position p of the walk is byte p of the stream after the leading pad; a text's span is
        # its bytes and the pad after it
        spans = np.fromiter(map(len, datas), dtype=np.intp, count=len(datas)) + context
        owner = np.repeat(np.arange(len(datas)), spans)[where]
        group = owner * len(self._np_output) + found[where]  # (text, feature)
        # one sort of (group, position): a group's first key holds its first position
        bits = size.bit_length()  # < 63 bits in all: a chunk's texts x 2**17 features x size
        keys = np.sort((group << bits) | where)
        starts = np.flatnonzero(np.diff(keys >> bits, prepend=-1))  # groups are >= 0
        # each group's count at its first position, then read in the order of the positions
        # (a text's bytes follow the previous one's)
        at = np.zeros(size, dtype=np.float32)
        at[keys[starts] & ((1 << bits) - 1)] = np.diff(np.r_[starts, len(keys)])
        positions = np.flatnonzero(at)
        bounds = np.searchsorted(positions, np.r_[np.cumsum(spans) - spans, size])
        return found[positions], at[positions], bounds
