"""py3langid's scores with its byte scanner's walk memoised per word in context: exact.

py3langid counts the byte n-gram features of a text by walking an Aho-Corasick automaton over
its UTF-8 bytes, one Python step per byte (`py3langid.langid.visit_counts`: two thirds of its
time per text). The automaton's state after a byte is the node of the longest suffix of the bytes
read that is a prefix of a feature, so it depends on the last `depth` bytes only (`depth`: the
deepest node, measured when the scanner is built). A word's features therefore depend on the
word and the `depth - 1` bytes before it: the walk over that context and word, from the start
state, gives the same states on the word's bytes as the walk over the whole text. Words and
their contexts repeat across the windows and replies of a log, so each is walked once.

The features are merged in the order of their first occurrence, as `Counter` does over the
whole walk: the naive-Bayes dot product then adds the same float32 terms in the same order, so
`rank` returns exactly py3langid's values (tests/unit/test_langid_scan.py compares them).
"""

from __future__ import annotations

from array import array
from collections import Counter, deque

from py3langid.langid import LanguageIdentifier

MEMO_SIZE = 20_000  # words in context kept (~350 bytes each: ~7 MiB); the memo is emptied when full
# The packaged model's deepest scanner state is 6 bytes deep (`scanner_depth`, 1.5 s to walk
# over its 104,583 states, so measured by tests/unit/test_langid_scan.py, not at each start).
SCANNER_DEPTH = 6


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


class MemoIdentifier(LanguageIdentifier):
    """A LanguageIdentifier whose feature counts come from memoised walks (see the module
    docstring); everything else is py3langid's own code (`from_model_file`, `set_languages`,
    `rank`)."""

    __slots__ = ("_context", "_memo")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._context = SCANNER_DEPTH - 1
        self._memo: dict = {}

    def _raw_score(self, text):
        visits = self.feature_counts(text)
        if visits:
            return self._sparse_score(visits, self.nb_ptc)
        return super()._raw_score(b"")  # py3langid's own value for a featureless text

    def feature_counts(self, data: bytes) -> Counter | None:
        """py3langid's `visit_counts` of `data`: the same features in the same order."""
        features: list[int] = []
        memo, context = self._memo, self._context
        if len(memo) > MEMO_SIZE:
            memo.clear()
        start, size = 0, len(data)
        while start < size:
            end = data.find(b" ", start) + 1 or size  # a word and the space after it
            begin = max(0, start - context)
            key = data[begin:end] if begin else (start, data[:end])
            found = memo.get(key)
            if found is None:
                found = memo[key] = self._walk(start - begin, data[begin:end])
            features += found
            start = end
        return Counter(features) if features else None

    def _walk(self, skip: int, piece: bytes) -> array:
        """The features of the states after `piece`'s bytes from `skip` on."""
        moves, rowbase, output = self.tk_nextmove, self._rowbase, self.tk_output
        state, features = 0, []
        for i, byte in enumerate(piece):
            state = moves[rowbase[state] + byte]
            feature = output[state]
            if feature >= 0 and i >= skip:
                features.append(feature)
        return array("l", features)  # 8 bytes a feature, not a 28-byte int object each
