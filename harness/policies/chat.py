"""Token ids for prompts and injected turns, built with the model's own chat template.

An injection is rendered as the text the template puts after an assistant message that is
cut mid-answer (a sentinel marks the cut), then tokenised alone: the continuation generated so
far is never re-tokenised, so its token boundaries stay exactly what the engine produced.
"""

from __future__ import annotations

from typing import Literal

from harness.errors import UserError

_SENTINEL = "\ue000CUT\ue000"
Role = Literal["system", "user"]


class ChatFormat:
    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise UserError("the model's tokenizer has no chat template; use raw text prompts")
        self.eos_id = tokenizer.eos_token_id
        self._system_ok: bool | None = None

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, system: str | None, user: str) -> list[int]:
        """The initial prompt: [system], user, then the assistant header. Templates without a
        system role (Gemma-style) get the system text at the top of the user turn, as their
        model cards advise."""
        if system and not self.supports_system():
            messages = [{"role": "user", "content": f"{system}\n\n{user}"}]
        else:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": user}
            ]
        return self.encode(self._render(messages, generation_prompt=True))

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
