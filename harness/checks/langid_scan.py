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
`Counter` does over the walk, and the naive-Bayes dot product adds the same float32 terms in the
same order (the float16 table cast to float32 once: the cast is exact and is the one the product
does). `rank` is then py3langid's own code on these counts; `probabilities_many` normalises a
chunk's scores as one array, the same float32 operations per text as py3langid's `_decide`. Both
return exactly py3langid's values (tests/unit/test_langid_scan.py compares them; so did the
27,510 texts of bench/scoring.py's 2,500-conversation log).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np
from py3langid.langid import LanguageIdentifier

# Bytes of text walked at once (~40 bytes of arrays a byte: ~20 MiB at the most).
CHUNK_BYTES = 512 * 1024
# The packaged model's deepest scanner state is 6 bytes deep (`scanner_depth`, 1.5 s to walk
# over its 104,583 states, so measured by tests/unit/test_langid_scan.py, not at each start).
SCANNER_DEPTH = 6
PAD = 0xFF  # never in UTF-8 (nor in py3langid's `surrogatepass` encoding)


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

    __slots__ = ("_moves", "_np_rowbase", "_np_output", "_table")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        moves = self.tk_nextmove  # py3langid's array.array of the rows of transitions
        self._moves = np.frombuffer(moves, dtype=f"u{moves.itemsize}")
        self._np_rowbase = np.asarray(self._rowbase, dtype=np.int64)
        self._np_output = np.asarray(self.tk_output, dtype=np.int64)
        if not self.pad_resets():
            raise ValueError("py3langid's scanner has features with byte 0xFF: cannot batch")
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
        scores = np.stack([self._product(found) for found in self.feature_counts(datas)])
        factors = [1.0 / math.sqrt(len(data) or 1) for data in datas]
        scores *= np.array(factors).astype(np.float32)[:, None]  # as a float32 scalar each
        np.exp(scores - scores.max(axis=1, keepdims=True), out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        for i, j in self._alias_pairs:
            scores[:, i] += scores[:, j]
            scores[:, j] = 0.0
        classes = self.nb_classes
        if not self._alias_pairs:
            return [dict(zip(classes, row, strict=True)) for row in scores.tolist()]
        out = []
        for row in scores.tolist():
            merged: dict[str, float] = {}
            for lang, score in zip(classes, row, strict=True):
                merged.setdefault(lang, score)  # the first column holds the merged score
            out.append(merged)
        return out

    def _raw_score(self, text):
        return self._product(self.feature_counts([text])[0])

    def _product(self, found: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """py3langid's `_raw_score` of a text from its counts (float32 scores per class)."""
        if found is None:
            return super()._raw_score(b"")  # py3langid's own value for a featureless text
        features, counts = found
        if self._table is None:
            self._table = self.nb_ptc.astype(np.float32)
        # py3langid's `_sparse_score`, the same float32 operands in the same order
        return np.log1p(counts) @ self._table[features] + self.nb_pc

    def feature_counts(self, datas: Sequence[bytes]) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """Per encoded text, py3langid's `visit_counts` as arrays: the features in the order of
        their first occurrence and their counts (float32); None for a text without features."""
        if not datas:
            return []
        context = SCANNER_DEPTH - 1
        pad = bytes([PAD]) * context
        stream = np.frombuffer(pad + pad.join(datas), dtype=np.uint8)
        size = len(stream) - context
        state = np.zeros(size, dtype=np.int64)
        for step in range(SCANNER_DEPTH):  # the state after each byte, from its context
            state = self._moves[self._np_rowbase[state] + stream[step : step + size]]
        found = self._np_output[state]
        where = np.flatnonzero(found >= 0)
        if not where.size:
            return [None] * len(datas)
        # position p of `state` is byte p of the stream after the leading pad
        ends = np.cumsum(np.fromiter(map(len, datas), dtype=np.int64, count=len(datas)) + context)
        owner = np.searchsorted(ends - context, where, side="right")
        n_features = len(self._np_output)
        group = owner * n_features + found[where]  # (text, feature)
        # one sort of (group, position): a group's first key holds its first position
        bits = size.bit_length()  # < 63 bits in all: a chunk's texts x 2**17 features x size
        keys = np.sort((group << bits) | where)
        group = keys >> bits
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        counts = np.diff(np.r_[starts, len(keys)])
        # the groups in the order of their first byte (a text's bytes follow the previous one's)
        slot = np.full(size, -1, dtype=np.int64)
        slot[keys[starts] & ((1 << bits) - 1)] = np.arange(len(starts))
        order = slot[slot >= 0]
        group, counts = group[starts][order], counts[order].astype(np.float32)
        features = (group % n_features).astype(np.intp)
        bounds = np.searchsorted(group // n_features, np.arange(len(datas) + 1)).tolist()
        return [
            (features[a:b], counts[a:b]) if b > a else None
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
