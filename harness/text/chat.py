"""Token ids for prompts and injected turns, built with the model's own chat template.

Generation and the probe both render their prompts here, so the probe's prompt for a generated
sample is the sample's prompt token for token. The system prompt of a chat is one of:

- a text: the system turn (templates without a system role get the text at the top of the user
  turn, as their model cards advise);
- None (or empty): no system turn at all. A template that inserts a default system prompt when
  given none (SmolLM2's: "You are a helpful AI assistant named SmolLM ...") has that turn cut
  out of its output;
- TEMPLATE_DEFAULT: no system message is given to the template, so a template like SmolLM2's
  inserts its default system prompt.

An injection is rendered as the text the template puts after an assistant message that is
cut mid-answer (a sentinel marks the cut), then tokenised alone: the continuation generated so
far is never re-tokenised, so its token boundaries stay exactly what the engine produced.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from harness.errors import UserError
from harness.text import tokens

# Marks a cut in rendered template text (system turn, end of an assistant message): private-use
# characters that no prompt contains and no template trims.
_SENTINEL = "\ue000CUT\ue000"
Role = Literal["system", "user"]
# One span of a rendered user turn: (segment kind, segment source, token ids, text)
TurnPiece = tuple[str, str, list[int], str]


class TemplateDefault(Enum):
    """A system prompt value of its own type, so no text can be mistaken for it."""

    TEMPLATE_DEFAULT = "template default"


TEMPLATE_DEFAULT = TemplateDefault.TEMPLATE_DEFAULT
SystemPrompt = str | None | TemplateDefault


class ChatFormat:
    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise UserError("the model's tokenizer has no chat template; use raw text prompts")
        self.eos_id = tokenizer.eos_token_id
        self._system_ok: bool | None = None
        # user turn -> its labelled tokens: a template renders the same turn the same way, and
        # logs repeat user messages ("continue", "thanks"); bounded, cleared when full
        self._turns: dict[tuple, list[tuple[int, str, str]]] = {}
        # (that key, closed by the model's own EOS) -> the turn's pieces, decoded once
        self._pieces: dict[tuple, list[TurnPiece]] = {}
        # (system, first user message) -> prompt ids, the same way: a log's conversations
        # share a system prompt and often their opening message (a render and an encode each)
        self._prompts: dict[tuple, list[int]] = {}

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return tokens.encode(self.tokenizer, text)

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """`encode` of each text (through the fast backend where exact: `harness.text.tokens`)."""
        return tokens.encode_many(self.tokenizer, texts)

    def prompt_ids(self, system: SystemPrompt, user: str) -> list[int]:
        """The initial prompt: [system turn], user turn, then the assistant header (see the
        module docstring for the values of `system`). A fresh list each call."""
        key = (system, user)
        ids = self._prompts.get(key)
        if ids is None:
            ids = self.encode(self.prompt_text(system, user))
            if len(self._prompts) >= 4096:
                self._prompts.clear()
            self._prompts[key] = ids
        return list(ids)

    def prompt_text(self, system: SystemPrompt, user: str) -> str:
        user_turn = {"role": "user", "content": user}
        if system is TEMPLATE_DEFAULT:
            return self._render([user_turn], generation_prompt=True)
        if not system:
            return self._without_system_turn(user_turn)
        if not self.supports_system():
            merged = {"role": "user", "content": f"{system}\n\n{user}"}
            return self._render([merged], generation_prompt=True)
        system_turn = {"role": "system", "content": system}
        return self._render([system_turn, user_turn], generation_prompt=True)

    def _without_system_turn(self, user_turn: dict) -> str:
        """The chat with its system turn cut out: rendered with a sentinel system turn, which
        must be the exact start of the output. Templates without a system role have none."""
        if not self.supports_system():
            return self._render([user_turn], generation_prompt=True)
        marker = {"role": "system", "content": _SENTINEL}
        system_turn = self._render([marker], generation_prompt=False)
        full = self._render([marker, user_turn], generation_prompt=True)
        if not full.startswith(system_turn) or _SENTINEL in full[len(system_turn) :]:
            raise UserError(
                "cannot cut the system turn out of this chat template; give a system prompt "
                "or use the template's default one (:default)"
            )
        # A leading BOS belongs to the sequence, not to the system turn, and must stay; ChatML
        # tokenizers whose "BOS" is the turn opener <|im_start|> (followed by the role) keep
        # nothing.
        bos = self.tokenizer.bos_token or ""
        opens_turn = system_turn[len(bos) :].lstrip().startswith("system")
        keep = bos if bos and system_turn.startswith(bos) and not opens_turn else ""
        return keep + full[len(system_turn) :]

    def system_prefix_len(self, system: str, user: str) -> int:
        """Number of prompt tokens up to the end of the system turn: the prompt keys that the
        attention-bias policy boosts."""
        full = self.prompt_ids(system, user)
        head = self.encode(self._render([{"role": "system", "content": system}], False))
        if full[: len(head)] != head:
            raise UserError("cannot locate the system turn at the start of the chat prompt")
        return len(head)

    def supports_system(self) -> bool:
        """Templates without a system role either raise or silently drop the text."""
        if self._system_ok is None:
            try:
                text = self._render(
                    [{"role": "system", "content": _SENTINEL}, {"role": "user", "content": "x"}],
                    generation_prompt=True,
                )
                self._system_ok = _SENTINEL in text
            except Exception:
                self._system_ok = False
        return self._system_ok

    def turn_ids(self, role: Role, text: str, last_token: int | None) -> list[int]:
        """Ids that close the assistant turn, add a `role` turn with `text`, and reopen the
        assistant turn. When the model already closed its turn (EOS), the closing token is not
        repeated."""
        if role == "system" and not self.supports_system():
            raise UserError(
                "placement 'system': the model's chat template has no system role "
                "(use placement 'user' or 'inline')"
            )
        messages = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": _SENTINEL},
            {"role": role, "content": text},
        ]
        try:
            rendered = self._render(messages, generation_prompt=True)
        except Exception as exc:  # e.g. templates that insist on alternating roles
            raise UserError(f"placement '{role}': the chat template refused it ({exc})") from None
        if _SENTINEL not in rendered or text not in rendered:
            raise UserError(f"placement '{role}': the chat template drops the reminder text")
        ids = self.encode(rendered.split(_SENTINEL, 1)[1])
        if last_token is not None and ids and last_token == ids[0] == self.eos_id:
            ids = ids[1:]
        return ids

    def inline_ids(self, text: str) -> list[int]:
        """A reminder written inside the assistant turn, as a bracketed aside."""
        return self.encode(f"\n\n[{text}]\n\n")

    def messages_ids(self, messages: list[dict]) -> list[int]:
        """A whole chat rendered with the generation prompt (the simulated user's view of a
        conversation, re-rendered each turn: it is a prompt of its own, not a record)."""
        return self.encode(self._render(messages, generation_prompt=True))

    def user_turn_pieces(
        self,
        user: str,
        last_token: int | None,
        reminder: str | None = None,
        placement: str = "user",
        source: str = "user",
    ) -> list[TurnPiece]:
        """The ids that close the assistant turn, open the next user turn with `user` and
        reopen the assistant turn, split into pieces: `user` (the message), `injected` (a
        reminder: a system turn before the user turn, or `Reminder: <text>` prepended to the
        message) and `markup` (everything the template adds). The span is tokenised once, as
        the template renders it, and cut by character offsets, so the ids are the natural
        tokenisation and the pieces tile them exactly."""
        if reminder and placement == "system" and not self.supports_system():
            raise UserError(
                "placement 'system': the model's chat template has no system role "
                "(use placement 'user')"
            )
        key = (user, reminder, placement, source)
        labelled = self._turns.get(key)
        if labelled is None:
            labelled = self._label_turn(user, reminder, placement, source)
            if len(self._turns) >= 4096:
                self._turns.clear()
                self._pieces.clear()
            self._turns[key] = labelled
        # the model closed its turn itself: no second EOS
        closed = last_token is not None and bool(labelled) and last_token == labelled[0][0]
        closed = closed and last_token == self.eos_id
        pieces = self._pieces.get((key, closed))
        if pieces is None:
            pieces = self._pieces[(key, closed)] = self._group(labelled[1:] if closed else labelled)
        return [(kind, src, list(ids), text) for kind, src, ids, text in pieces]

    def _label_turn(
        self, user: str, reminder: str | None, placement: str, source: str
    ) -> list[tuple[int, str, str]]:
        """(id, kind, source) per token of the user turn's span (see `user_turn_pieces`)."""
        messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
        parts: list[tuple[str, str, str]] = []  # (kind, source, text) in rendered order
        content = user
        if reminder and placement == "system":
            messages.append({"role": "system", "content": reminder})
            parts.append(("injected", "reminder", reminder))
        elif reminder:
            lead = f"Reminder: {reminder}\n\n"
            content = lead + user
            parts.append(("injected", "reminder", lead))
        parts.append(("user", source, user))
        messages.append({"role": "user", "content": content})
        try:
            rendered = self._render(messages, generation_prompt=True)
        except Exception as exc:  # e.g. templates that insist on alternating roles
            raise UserError(f"the chat template refused a user turn ({exc})") from None
        if _SENTINEL not in rendered:
            raise UserError("the chat template drops the assistant turn")
        tail = rendered.split(_SENTINEL, 1)[1]
        spans, pos = [], 0
        for kind, src, text in parts:
            at = tail.find(text, pos)
            if at < 0:
                raise UserError(f"the chat template drops the {kind} text of a user turn")
            spans.append((at, at + len(text), kind, src))
            pos = at + len(text)
        return self._label_tokens(tail, spans)

    def _label_tokens(self, text: str, spans: list[tuple]) -> list[tuple[int, str, str]]:
        """(id, kind, source) per token of `text`: a token belongs to the span holding its
        first character, else it is markup. Tokenizers without offsets (slow ones) tokenise
        each span and each gap alone."""
        encoded = tokens.encode_offsets(self.tokenizer, text)
        if encoded is not None:
            out = []
            for token, (begin, _end) in zip(*encoded, strict=True):
                hit = next((s for s in spans if s[0] <= begin < s[1]), None)
                out.append((token, *(hit[2:] if hit else ("markup", "chat"))))
            return out
        out, pos = [], 0
        for begin, end, kind, src in [*spans, (len(text), len(text), "markup", "chat")]:
            out += [(t, "markup", "chat") for t in self.encode(text[pos:begin])]
            out += [(t, kind, src) for t in self.encode(text[begin:end])]
            pos = end
        return out

    def _group(self, labelled: list[tuple[int, str, str]]) -> list[TurnPiece]:
        pieces: list[TurnPiece] = []
        for token, kind, src in labelled:
            if pieces and pieces[-1][:2] == (kind, src):
                pieces[-1][2].append(token)
            else:
                pieces.append((kind, src, [token], ""))
        texts = tokens.decode_many(self.tokenizer, [ids for _, _, ids, _ in pieces], False)
        return [
            (kind, src, ids, text) for (kind, src, ids, _), text in zip(pieces, texts, strict=True)
        ]
