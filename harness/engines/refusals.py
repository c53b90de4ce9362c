"""What a chat endpoint cannot do, refused before the first request.

A chat API takes whole messages and gives text back: it cannot run forward passes for hidden
states or prompt log-probs, or take an attention bias; chat completions cannot continue an
assistant message the harness started (no prefill), which Anthropic's Messages API can
(`chat.protocol: anthropic`) but with one system prompt only. Every
feature of a run config that needs what its protocol lacks is named here, in one line with the
provider, the feature and what to use instead; nothing is approximated.
"""

from __future__ import annotations

from urllib.parse import urlparse

from harness.config.endpoint import server_url
from harness.config.run import RunConfig
from harness.errors import UserError


def provider(base_url: str | None, protocol: str = "openai") -> str:
    """The endpoint as a line names it: its host (and port)."""
    url = server_url(base_url, protocol) or ""
    return urlparse(url).netloc or url or "the chat endpoint"


def chat_refusals(config: RunConfig) -> list[tuple[str, str]]:
    """(feature, alternative) for every feature of `config` the chat engine cannot run."""
    if config.generation.protocol == "anthropic":
        return _anthropic_refusals(config) + _api_refusals(config)
    out: list[tuple[str, str]] = []
    specs = [*config.policies, *(config.conversation_policies or [])]
    prefill = "chat.protocol: anthropic (an Anthropic Messages endpoint)"
    for spec in specs:
        if spec.name == "restate":
            out.append((
                "assistant prefill (policy restate)",
                f"{prefill}, a local engine (vllm, hf), or a reminder policy with placement "
                "user or system",
            ))  # fmt: skip
        elif getattr(spec, "placement", None) == "inline":
            out.append((
                f"assistant prefill (policy {spec.name}, placement inline)",
                f"placement user or system, or {prefill}",
            ))  # fmt: skip
    if config.forks is not None and config.forks.at is not None:
        out.append((
            "token-level forks (forks.at continues a reply mid-message: assistant prefill)",
            f"forks.at_turns (forks at turn boundaries), {prefill}, or a local engine",
        ))  # fmt: skip
    return out + _api_refusals(config)


def _anthropic_refusals(config: RunConfig) -> list[tuple[str, str]]:
    """What the Messages API lacks beside any chat API: a system message after the first."""
    out: list[tuple[str, str]] = []
    specs = [*config.policies, *(config.conversation_policies or [])]
    for spec in specs:
        if getattr(spec, "placement", None) == "system":
            out.append((
                f"a system message after the first (policy {spec.name}, placement system: "
                "the Messages API takes one system prompt)",
                "placement user (between turns) or inline (within a reply)",
            ))  # fmt: skip
    return out


def _api_refusals(config: RunConfig) -> list[tuple[str, str]]:
    """What no chat API can do: hidden states, prompt log-probs, attention bias."""
    out: list[tuple[str, str]] = []
    for spec in [*config.policies, *(config.conversation_policies or [])]:
        if spec.name == "attention_bias":
            out.append(("attention bias (policy attention_bias)", "generation.engine: hf"))
    if config.probe.enabled:
        out.append((
            "hidden states and prompt log-probs (probe)",
            "probe.enabled: false, or probe a local copy of the model (backend hf or vllm)",
        ))  # fmt: skip
    if config.theory.bias_lams:
        out.append(("attention bias (theory.bias_lams)", "theory.bias_lams: [] or engine hf"))
    return out


def refuse_chat_features(config: RunConfig) -> None:
    """Raise the first refusal of `config` on the chat engine as one UserError line."""
    found = chat_refusals(config)
    if found:
        feature, alternative = found[0]
        gen = config.generation
        kind = "engine chat" + (", protocol anthropic" if gen.protocol == "anthropic" else "")
        raise UserError(
            f"{provider(gen.base_url, gen.protocol)} ({kind}) cannot do {feature}; "
            f"use {alternative}"
        )
