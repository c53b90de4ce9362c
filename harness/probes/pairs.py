"""Where paired prompts and the shared continuation come from.

Prompts: raw text (tokenised exactly as given, no special tokens added) or a chat (system A vs
system B with one user message), rendered by the generation path's own renderer
(`harness.text.chat.ChatFormat`), so a chat prompt here is token for token the prompt a generation
with that system prompt got. Two special system values:
- `:none`    no system turn at all (even where the template would insert a default one);
- `:default` no system message given, so a template like SmolLM2's inserts its DEFAULT system
             prompt ("You are a helpful AI assistant named SmolLM ...").
Continuation: one list of token ids shared by both prompts, from a text file (tokenised alone,
no special tokens), a generation record (`continuation_ids` of a JSONL row, never re-tokenised),
or sampled by the model itself from prompt A (`generate`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.engines.base import GenerationRequest, SamplingSettings
from harness.engines.vllm_engine import VllmEngine
from harness.errors import UserError
from harness.text.chat import TEMPLATE_DEFAULT, ChatFormat, SystemPrompt
from harness.userfiles import read_user_text

# the user-facing spellings of the two special system values
NO_SYSTEM = ":none"
DEFAULT_SYSTEM = ":default"


class PairSpec(BaseModel):
    """One prompt pair: raw texts (prompt_a/prompt_b) or a chat (system_a/system_b + user)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[\w.:+-]+$")
    prompt_a: str | None = None
    prompt_b: str | None = None
    system_a: str | None = None
    system_b: str | None = None
    user: str | None = None
    # this pair's own continuation (text file or gens.jsonl#row); None: the command's one
    continuation: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> PairSpec:
        raw = self.prompt_a is not None or self.prompt_b is not None
        chat = any(v is not None for v in (self.system_a, self.system_b, self.user))
        if raw == chat:
            raise ValueError("give either prompt_a + prompt_b, or system_a + system_b + user")
        if raw and (self.prompt_a is None or self.prompt_b is None):
            raise ValueError("prompt_a and prompt_b must both be given")
        if chat and (self.system_a is None or self.system_b is None or self.user is None):
            raise ValueError("system_a, system_b and user must all be given")
        return self

    @property
    def is_chat(self) -> bool:
        return self.user is not None


def read_text_arg(value: str, base: Path | None = None) -> str:
    """`@path` reads a file (relative to `base` when given); anything else is the text itself."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise UserError(f"file not found: {path}")
    return read_user_text(path)


def load_pairs(path: Path) -> list[PairSpec]:
    """A YAML file `pairs: [{name, prompt_a, prompt_b} | {name, system_a, system_b, user}]`;
    text values may be `@file` (relative to the YAML file)."""
    if not path.is_file():
        raise UserError(f"pairs file not found: {path}")
    try:
        data = yaml.safe_load(read_user_text(path))
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    items = data.get("pairs") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: expected a non-empty list under 'pairs'")
    pairs = []
    for i, item in enumerate(items):
        try:
            spec = PairSpec.model_validate(item)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "pair"
            raise UserError(f"{path}: pairs[{i}].{where}: {err['msg']}") from None
        texts = {
            k: read_text_arg(v, path.parent)
            for k, v in spec.model_dump().items()
            if k not in ("name", "continuation") and v is not None
        }
        if spec.continuation is not None and not Path(spec.continuation.lstrip("@")).is_absolute():
            texts["continuation"] = str(path.parent / spec.continuation.lstrip("@"))
        pairs.append(spec.model_copy(update=texts))
    names = [p.name for p in pairs]
    if len(set(names)) != len(names):
        raise UserError(f"{path}: pair names must be unique")
    return pairs


def system_prompt(value: str) -> SystemPrompt:
    """The renderer's system value of a pair's system text: `:none` is None (no system turn),
    `:default` the template's default, anything else the text itself."""
    return {NO_SYSTEM: None, DEFAULT_SYSTEM: TEMPLATE_DEFAULT}.get(value, value)


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` exactly as given: no BOS/EOS added (chat templates carry their own)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def pair_prompt_ids(tokenizer: Any, spec: PairSpec) -> tuple[list[int], list[int]]:
    if spec.is_chat:
        if not getattr(tokenizer, "chat_template", None):
            raise UserError(
                "this model's tokenizer has no chat template: use --prompt-a/--prompt-b"
            )
        chat = ChatFormat(tokenizer)
        systems = (spec.system_a or "", spec.system_b or "")
        ids_a, ids_b = (chat.prompt_ids(system_prompt(s), spec.user or "") for s in systems)
    else:
        ids_a, ids_b = (
            encode_text(tokenizer, t) for t in (spec.prompt_a or "", spec.prompt_b or "")
        )
    if not ids_a or not ids_b:
        raise UserError(f"pair '{spec.name}': empty prompt (0 tokens)")
    return ids_a, ids_b


def record_continuation(path: Path, row: int = 0) -> list[int]:
    """`continuation_ids` of row `row` of a generations JSONL file, used as stored."""
    if not path.is_file():
        raise UserError(f"generation record not found: {path}")
    lines = [line for line in read_user_text(path).splitlines() if line.strip()]
    if not 0 <= row < len(lines):
        raise UserError(f"{path}: row {row} out of range (file has {len(lines)} records)")
    try:
        ids = json.loads(lines[row]).get("continuation_ids")
    except (json.JSONDecodeError, AttributeError):
        raise UserError(f"{path}: row {row} is not a JSON object") from None
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise UserError(f"{path}: row {row} has no integer list 'continuation_ids'")
    return ids


def file_continuation(tokenizer: Any, spec: str) -> list[int]:
    """`@text.txt` / `text.txt` (tokenised alone) or `gens.jsonl[#row]` (a generation record)."""
    value = spec[1:] if spec.startswith("@") else spec
    path_text, _, row = value.partition("#")
    path = Path(path_text).expanduser()
    if path.suffix == ".jsonl":
        if row and not row.isdigit():
            raise UserError(f"continuation '{spec}': the row after '#' must be an integer")
        return record_continuation(path, int(row or 0))
    if not path.is_file():
        raise UserError(f"continuation file not found: {path}")
    return encode_text(tokenizer, read_user_text(path))


# sampling of `--continuation generate`, the same on both generators
GENERATE_TEMPERATURE = 0.7
GENERATE_TOP_P = 0.95


def generate_continuation(
    model: Any,
    prompt_ids: list[int],
    tokens: int,
    seed: int = 0,
    temperature: float = GENERATE_TEMPERATURE,
) -> list[int]:
    """Sample exactly `tokens` tokens from prompt A (EOS suppressed until then: min_new_tokens),
    so every pair has a continuation of the requested length. temperature 0 = greedy."""
    import torch

    torch.manual_seed(seed)
    sample = temperature > 0
    extra = {"temperature": temperature, "top_p": GENERATE_TOP_P} if sample else {}
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=sample,
            **extra,
        )
    return out[0, len(prompt_ids) :].tolist()


def generate_continuations_vllm(
    model_path: Path, prompts: list[list[int]], tokens: int, seed: int = 0
) -> list[list[int]]:
    """`generate_continuation` for many prompts in one vLLM batch (same sampling, exactly
    `tokens` tokens, each request seeded with `seed`). The engine is closed before returning:
    an idle vLLM CPU worker keeps spinning and would slow the probe."""

    settings = SamplingSettings(
        temperature=GENERATE_TEMPERATURE,
        top_p=GENERATE_TOP_P,
        max_tokens=tokens,
        min_tokens=tokens,
        seed=seed,
    )
    longest = max(len(p) for p in prompts) + tokens
    engine = VllmEngine(model_path, max_model_len=longest, enable_prefix_caching=False)
    try:
        results = engine.generate(
            [GenerationRequest(prompt_ids=p, sampling=settings) for p in prompts]
        )
    finally:
        engine.close()
    return [r.token_ids for r in results]
