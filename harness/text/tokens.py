"""Encode and decode through a fast tokenizer's Rust backend where that gives transformers'
own result: the same ids and texts without transformers' per-call overhead (its `__call__`
and `decode` convert every id through `to_py_obj`: a third of the CPU time of building and
cutting a chat log's records, bench/scoring.py). A GPT-2 byte-level BPE (the embedded
model's) is decoded from each id's bytes (`BytePieces`) where that gives the backend's own
result. Any other tokenizer goes through transformers' calls, unchanged.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any


def encoder(tokenizer) -> Any | None:
    """The backend where calling it gives transformers' `tokenizer(text)`: it truncates and
    pads nothing (what transformers' call sets it to); None otherwise."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    return backend


def _memo(table: weakref.WeakKeyDictionary, key, find: Callable[[Any], Any]) -> Any:
    """`find(key)`, kept in `table` while `key` lives (found again each time for an object
    that takes no weak reference)."""
    try:
        return table[key]
    except (KeyError, TypeError):  # TypeError: an object that takes no weak reference
        pass
    found = find(key)
    with contextlib.suppress(TypeError):
        table[key] = found
    return found


# tokenizer -> its `_decoder` answer: asked once per decode, ~100,000 times per 10,000 logged
# replies, while the answer depends on the tokenizer's class and settings only
_DECODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _decoder(tokenizer) -> Any | None:
    """The backend where its `decode` is transformers' `decode`: the stock fast class's
    `_decode` (not a subclass's own), with no clean-up of tokenization spaces."""
    return _memo(_DECODERS, tokenizer, _find_decoder)


def _find_decoder(tokenizer) -> Any | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return None
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    cls = type(tokenizer)
    stock = (
        cls._decode is TokenizersBackend._decode
        and cls.decode is PreTrainedTokenizerBase.decode
        and cls.batch_decode is PreTrainedTokenizerBase.batch_decode
    )
    return backend if stock else None


def encode(tokenizer, text: str) -> list[int]:
    """`tokenizer(text, add_special_tokens=False)["input_ids"]` as a list."""
    backend = encoder(tokenizer)
    if backend is None:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return backend.encode(text, add_special_tokens=False).ids


def encode_many(tokenizer, texts: list[str]) -> list[list[int]]:
    """`encode` of each text: one call to the backend's batch encoder, without offsets
    (`encode_batch_fast`, where the installed tokenizers has it): the same ids for ~15 % less
    CPU than a call per text (bench/scoring.py's replies)."""
    backend = encoder(tokenizer)
    if backend is None:
        return [encode(tokenizer, text) for text in texts]
    return _backend_many(backend, texts)


def _backend_many(backend, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    batch = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return [found.ids for found in batch(texts, add_special_tokens=False)]


def encode_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
    """(ids, character offsets) of `text` without special tokens; None for a tokenizer that
    gives no offsets (slow ones)."""
    backend = encoder(tokenizer)
    if backend is not None:
        enc = backend.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), enc["offset_mapping"]
    except (NotImplementedError, KeyError, TypeError, ValueError):
        return None


def decode(tokenizer, ids: list[int], skip_special_tokens: bool = True) -> str:
    """`tokenizer.decode(ids, skip_special_tokens=...)`."""
    return decode_many(tokenizer, [ids], skip_special_tokens)[0]


def decode_many(tokenizer, seqs: list[list[int]], skip_special_tokens: bool = True) -> list[str]:
    """`tokenizer.batch_decode(seqs, skip_special_tokens=...)` (a list for no sequence)."""
    if not seqs:
        return []
    backend = _decoder(tokenizer)
    if backend is None:
        return tokenizer.batch_decode(seqs, skip_special_tokens=skip_special_tokens)
    pieces = _byte_pieces(backend)
    if pieces is None:
        return [backend.decode(ids, skip_special_tokens=skip_special_tokens) for ids in seqs]
    return [pieces.decode(ids, skip_special_tokens) for ids in seqs]


class BytePieces:
    """A byte-level BPE's decode (a `ByteLevel` decoder: each token's characters map back to
    one byte each, the text is the UTF-8 of the tokens' bytes joined) done in Python from each
    id's bytes, looked up once per id: the backend's `decode` costs ~10-30 us a call, ~44,000
    calls per 2,500 logged conversations (window texts). Exact by construction: a sequence
    holding an added token (special or not) or an id without bytes of its own, or whose bytes
    are not valid UTF-8 (a window cut inside a character: the backend's lossy replacement),
    is decoded by the backend itself."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.added = frozenset(backend.get_added_tokens_decoder())
        # id -> its bytes (None: the backend's), every id at once: filled lazily, the pieces
        # were scattered among a chunk's short-lived objects and kept their heap pages from
        # being returned (peak RSS +25 MiB at 2,500 conversations)
        size = backend.get_vocab_size(with_added_tokens=True)
        self.table: dict[int, bytes | None] = {i: self.piece(i) for i in range(size)}

    def piece(self, token_id: int) -> bytes | None:
        token = None if token_id in self.added else self.backend.id_to_token(token_id)
        if token is None:
            return None
        try:
            return bytes([_UNICODE_BYTES[char] for char in token])
        except KeyError:  # a character outside the byte alphabet: the backend decides
            return None

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        table = self.table
        try:
            data = b"".join(map(table.__getitem__, ids))
        except KeyError:
            for i in ids:
                if i not in table:
                    table[i] = self.piece(i)
            return self.decode(ids, skip_special_tokens)
        except TypeError:  # a None among the pieces
            return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)


def _byte_unicode() -> dict[str, int]:
    """GPT-2's byte-level alphabet (tokenizers' `bytes_char`): printable Latin-1 bytes stand
    for themselves, the others for the code points from 256 on, in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


_UNICODE_BYTES = _byte_unicode()
_PIECES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # backend -> BytePieces | None


def _byte_pieces(backend) -> BytePieces | None:
    """The backend's BytePieces where its decoder is `ByteLevel` alone; None otherwise."""
    return _memo(_PIECES, backend, _find_byte_pieces)


def _find_byte_pieces(backend) -> BytePieces | None:
    from tokenizers import decoders  # lazy: tokenizers is only imported by backends' users

    return BytePieces(backend) if type(backend.decoder) is decoders.ByteLevel else None
