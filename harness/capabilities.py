"""What an engine can do, named once: engines declare the capabilities they have
(`harness.engines.kinds.EngineKind.capabilities`), and policies, probes, judges and the planner
ask for capabilities, never for an engine's name. `harness.engines.refusals` is the one place
that refuses a run whose parts need what its engine cannot do, naming both."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """One thing an engine can do; the value is how a refusal names it."""

    # continue an assistant message the harness started (restatement, inline reminders,
    # token-level forks)
    PREFILL = "assistant prefill"
    # a system message after the first (a reminder at placement system)
    LATER_SYSTEM_MESSAGES = "a system message after the first"
    # token ids in and out, so budgets and windows count the model's own tokens
    TOKEN_IDS = "token ids"
    # forward passes that return hidden states and prompt log-probs (the probe)
    HIDDEN_STATES = "hidden states"
    PROMPT_LOGPROBS = "prompt log-probs"
    # a bias added to the attention logits of the system prompt's keys
    ATTENTION_HOOKS = "attention hooks"
    # a logits processor run on every decoding step
    LOGITS_PROCESSORS = "logits processors"
    # loads the model's weights from a folder (else: a hosted model known by name)
    LOCAL_WEIGHTS = "local weights"
    # requests an endpoint bills for (a run's budget and pricing apply)
    METERED = "metered requests"
    # shares the prompt prefix of concurrent requests (forks branch cheaply)
    PREFIX_CACHE = "prefix cache"
    # runs a request as two rows in one forward and feeds both the token drawn from their
    # combined scores (classifier-free guidance; vLLM has no such pairing)
    PAIRED_ROWS = "paired rows per request (guidance)"


Capabilities = frozenset[Capability]
