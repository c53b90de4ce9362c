"""Positions without the model's tokenizer: the token-like units a chat run counts `t` in.

A hosted chat API takes messages and returns text; its token ids are not ours to keep. The
rest of the harness counts positions in token ids (records, windows, turns), so a chat run
gets ids of its own: every position is one *piece* of text, and its id is the piece's UTF-8
bytes read as one integer behind a 0x01 byte (`piece_id`). Such an id decodes without any
vocabulary, in any later process (`harness score` on the run folder), and joining pieces gives
back the exact text. Where the pieces come from is the unit, `PositionUnits.label`:

- `logprobs`: the endpoint's own tokens (the `logprobs` of each reply: token bytes, else token
  strings) for what the model generated; the text the harness writes (prompts, user turns,
  reminders) is cut by the fallback below, since no chat API tokenises its input for us;
- `tiktoken:<encoding>`: a tiktoken encoding (its BPE file must be in tiktoken's cache: nothing
  is downloaded at run time);
- `hf:<model or folder>`: a local Hugging Face tokenizer (a zoo name or a folder);
- `chars`: one position per Unicode character.

`PositionUnits` also plays the tokenizer for `harness.text.chat.ChatFormat`: a "chat template" that
writes each message behind a private-use role mark and closes it with an end mark. Each mark
is one position (the chat markup between turns), and the chat engine reads the messages back
from the ids it is sent (`messages_of`): the policies, conversations and judges build their
prompts exactly as for a local model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.capabilities import Capability
from harness.config.endpoint import parse_units
from harness.engines.kinds import kind_can
from harness.errors import UserError
from harness.models import locate_model, model_files
from harness.results.base import MODEL_TOKENS

# Role marks and the end-of-message mark: private-use characters no prompt contains.
ROLE_MARKS = {"system": "\ue020", "user": "\ue021", "assistant": "\ue022"}
END_MARK = "\ue023"
_MARK_ROLES = {mark: role for role, mark in ROLE_MARKS.items()}
MARKS = frozenset([*ROLE_MARKS.values(), END_MARK])


def t_unit_name(engine: str, positions: str | None = None, tokenizer: str | None = None) -> str:
    """The `t_unit` cell of a run's result files: `tokens` (the model's tokenizer), or on a
    chat endpoint its positions setting (`chars`, `tiktoken:<encoding>`, `hf:<model>`), and
    for `logprobs` `logprobs+<unit>`: the endpoint's tokens for what the model wrote, <unit>
    (`chat.tokenizer`, default chars) for the text the harness writes."""
    if kind_can(engine, Capability.TOKEN_IDS):
        return MODEL_TOKENS
    positions = positions or "logprobs"
    if parse_units(positions)[0] == "logprobs":
        return f"logprobs+{tokenizer or 'chars'}"
    return positions


def piece_id(piece: bytes) -> int:
    """The id of a piece of text: its bytes as one big-endian integer behind 0x01 (so leading
    zero bytes survive)."""
    return int.from_bytes(b"\x01" + piece, "big")


def piece_bytes(token_id: int) -> bytes:
    """The bytes of the piece `piece_id` made."""
    raw = token_id.to_bytes((token_id.bit_length() + 7) // 8, "big")
    if not raw or raw[0] != 1:
        raise ValueError(f"{token_id} is not a piece id")
    return raw[1:]


def _char_pieces(text: str) -> list[bytes]:
    return [c.encode() for c in text]


def _tiktoken_cutter(encoding: str) -> Callable[[str], list[bytes]]:
    import tiktoken

    try:
        enc = tiktoken.get_encoding(encoding)
    except ValueError as exc:
        raise UserError(f"positions: unknown tiktoken encoding '{encoding}' ({exc})") from None
    except Exception as exc:  # its BPE file is fetched on first use: offline, not cached
        raise UserError(
            f"positions: tiktoken encoding '{encoding}' is not in tiktoken's cache and nothing "
            f"is downloaded at run time ({type(exc).__name__}); use positions: chars or hf:<model>"
        ) from None

    def cut(text: str) -> list[bytes]:
        return enc.decode_tokens_bytes(enc.encode(text, disallowed_special=()))

    return cut


def _hf_cutter(name: str) -> Callable[[str], list[bytes]]:
    from pathlib import Path

    from transformers import AutoTokenizer

    # the tokenizer alone: no model is built (a dry run plans with it)
    path = Path(name) if Path(name).is_dir() else model_files(locate_model(name))
    tokenizer = AutoTokenizer.from_pretrained(path)

    def cut(text: str) -> list[bytes]:
        # pieces by character offsets: a token inside a character (a byte-level BPE's split
        # of an emoji) gets the character once, at its first token, and b"" after it
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        pieces, done = [], 0
        for _begin, end in enc["offset_mapping"]:
            end = max(end, done)
            pieces.append(text[done:end].encode())
            done = end
        if pieces and done < len(text):
            pieces[-1] += text[done:].encode()
        return pieces

    return cut


class PositionUnits:
    """Cuts text into position pieces and decodes piece ids; the chat engine's tokenizer."""

    chat_template = "harness chat marks"  # ChatFormat needs one; `apply_chat_template` renders
    bos_token = None
    clean_up_tokenization_spaces = False

    def __init__(self, positions: str = "chars", tokenizer: str | None = None) -> None:
        kind, arg = parse_units(positions)
        self.label = positions
        self.from_logprobs = kind == "logprobs"
        # what cuts the harness's own text: the unit itself, or under `logprobs` the
        # `tokenizer` setting (else characters)
        cutter_spec = positions if not self.from_logprobs else (tokenizer or "chars")
        self.text_unit = cutter_spec
        ck, carg = parse_units(cutter_spec)
        if ck == "logprobs":
            raise UserError("positions.tokenizer: logprobs cannot cut the harness's own text")
        self._cut = {
            "chars": lambda _a: _char_pieces,
            "tiktoken": _tiktoken_cutter,
            "hf": _hf_cutter,
        }[ck](carg)
        self.eos_token = END_MARK
        self.eos_token_id = piece_id(END_MARK.encode())
        self._mark_ids = {piece_id(m.encode()): m for m in MARKS}

    # -- the tokenizer surface ChatFormat and harness.text.tokens use
    def encode(self, text: str) -> list[int]:
        """Marks are one position each; the text between them is cut by the unit."""
        ids: list[int] = []
        start = 0
        for i, ch in enumerate(text):
            if ch in MARKS:
                ids += [piece_id(p) for p in self._cut(text[start:i])] if i > start else []
                ids.append(piece_id(ch.encode()))
                start = i + 1
        if start < len(text):
            ids += [piece_id(p) for p in self._cut(text[start:])]
        return ids

    def cut(self, text: str) -> list[bytes]:
        return self._cut(text) if text else []

    def __call__(self, text: str, add_special_tokens: bool = False, **_: Any) -> dict:
        return {"input_ids": self.encode(text)}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._mark_ids]
        return b"".join(piece_bytes(int(i)) for i in ids).decode("utf-8", errors="replace")

    def batch_decode(self, seqs: Sequence[Sequence[int]], skip_special_tokens: bool = True):
        return [self.decode(ids, skip_special_tokens) for ids in seqs]

    def apply_chat_template(
        self, messages: list[dict], tokenize: bool = False, add_generation_prompt: bool = False
    ) -> str:
        out = []
        for message in messages:
            role = message["role"]
            if role not in ROLE_MARKS:
                raise ValueError(f"role '{role}' has no place in a chat request")
            out.append(ROLE_MARKS[role] + str(message["content"] or "") + END_MARK)
        if add_generation_prompt:
            out.append(ROLE_MARKS["assistant"])
        text = "".join(out)
        return self.encode(text) if tokenize else text

    # -- the chat engine's side
    def messages_of(self, ids: Sequence[int]) -> tuple[list[dict], str]:
        """The messages a prompt's ids hold, and the text of an open assistant message at its
        end (an assistant prefill; "" when the prompt ends with the generation prompt)."""
        text = b"".join(piece_bytes(int(i)) for i in ids).decode("utf-8", errors="replace")
        messages: list[dict] = []
        role, buf, is_open = None, [], False
        for ch in text:
            if ch in _MARK_ROLES:
                if is_open and role is not None:
                    messages.append({"role": role, "content": "".join(buf)})
                role, buf, is_open = _MARK_ROLES[ch], [], True
            elif ch == END_MARK:
                if is_open and role is not None:
                    messages.append({"role": role, "content": "".join(buf)})
                is_open, buf = False, []
            elif is_open:
                buf.append(ch)
        if not is_open or role != "assistant":
            raise UserError("chat engine: a request must end with the assistant's turn open")
        return messages, "".join(buf)


# The most tokens a provider frames one message with (OpenAI's chat format takes 3 to 4 a
# message): each chat mark, one per message and one to open the reply, counts as this many.
FRAMING_TOKENS = 4


class ByteBound(PositionUnits):
    """Counts, never cuts: a bound on any provider's token count of the harness's own text,
    for the plan's budgets of a hosted model. One position per UTF-8 byte (no token of a
    byte-level BPE or a byte-fallback SentencePiece is shorter than one byte) and
    FRAMING_TOKENS per chat mark. Not a unit of t: records are cut by `PositionUnits`."""

    def __init__(self) -> None:
        super().__init__("chars")
        self._cut = _byte_pieces

    def encode(self, text: str) -> list[int]:
        ids = super().encode(text)
        return [i for i in ids for _ in range(FRAMING_TOKENS if i in self._mark_ids else 1)]


def _byte_pieces(text: str) -> list[bytes]:
    return [bytes([b]) for b in text.encode()]
