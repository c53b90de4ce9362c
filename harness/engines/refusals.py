"""What a chat-completions endpoint cannot do, refused before the first request.

A chat API takes whole messages and gives text back: it cannot continue an assistant message
the harness started (no prefill), run forward passes for hidden states or prompt log-probs, or
take an attention bias. Every feature of a run config that needs one of those is named here, in
one line with the provider, the feature and what to use instead; nothing is approximated.
"""

from __future__ import annotations

from urllib.parse import urlparse

from harness.config import RunConfig
from harness.endpoint import server_url
from harness.errors import UserError


def provider(base_url: str | None) -> str:
    """The endpoint as a line names it: its host (and port)."""
    url = server_url(base_url) or ""
    return urlparse(url).netloc or url or "the chat endpoint"


def chat_refusals(config: RunConfig) -> list[tuple[str, str]]:
    """(feature, alternative) for every feature of `config` the chat engine cannot run."""
    out: list[tuple[str, str]] = []
    specs = [*config.policies, *(config.conversation_policies or [])]
    for spec in specs:
        if spec.name == "restate":
            out.append((
                "assistant prefill (policy restate)",
                "a local engine (vllm, hf), or a reminder policy with placement user or system",
            ))  # fmt: skip
        elif spec.name == "attention_bias":
            out.append(("attention bias (policy attention_bias)", "generation.engine: hf"))
        elif getattr(spec, "placement", None) == "inline":
            out.append((
                f"assistant prefill (policy {spec.name}, placement inline)",
                "placement user or system",
            ))  # fmt: skip
    if config.probe.enabled:
        out.append((
            "hidden states and prompt log-probs (probe)",
            "probe.enabled: false, or probe a local copy of the model (backend hf or vllm)",
        ))  # fmt: skip
    if config.forks is not None and config.forks.at is not None:
        out.append((
            "token-level forks (forks.at continues a reply mid-message: assistant prefill)",
            "forks.at_turns (forks at turn boundaries), or a local engine",
        ))  # fmt: skip
    if config.theory.bias_lams:
        out.append(("attention bias (theory.bias_lams)", "theory.bias_lams: [] or engine hf"))
    return out


def refuse_chat_features(config: RunConfig) -> None:
    """Raise the first refusal of `config` on the chat engine as one UserError line."""
    found = chat_refusals(config)
    if found:
        feature, alternative = found[0]
        raise UserError(
            f"{provider(config.generation.base_url)} (engine chat) cannot do {feature}; "
            f"use {alternative}"
        )
