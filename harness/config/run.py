"""Pydantic models for run configs, and the loaders of run configs and task suites (the suite
schema is `harness.config.suites`, the policy specs `harness.config.policy_specs`, the
generation section `harness.config.generation`; their models are re-exported here for the callers).

A wrong config raises `UserError` with one line naming the file, the field and what was
expected; the CLI turns that into exit code 2 before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from harness.checks.base import NonEmptyText
from harness.checks.language import DEFAULT_CANDIDATE_LANGUAGES, LanguageCode
from harness.config.endpoint import BaseUrl, ServedModel
from harness.config.gate_specs import LOOP_METRICS, Family, GateSpec, gate_problem, one_sided
from harness.config.generation import (
    BudgetConfig,
    ChatOptions,
    GenerationConfig,
    ModelPrice,
    Precision,
    is_unset,
)
from harness.config.policy_specs import (
    BASELINE,
    Placement,
    PolicySpec,
    PolicySpecBase,
    policy_label,
    repeated_policy,
)
from harness.config.sampling import SampleRange, max_needed, sample_range
from harness.config.schema import Strict
from harness.config.suites import TaskItem, TaskSuite, UserSimulator, UserTurn

# re-exported: the suite models (harness.config.suites), the policy specs
# (harness.config.policy_specs) and the generation section (harness.config.generation)
__all__ = [
    "BASELINE", "Placement", "PolicySpec", "PolicySpecBase", "TaskItem", "TaskSuite",
    "UserSimulator", "UserTurn", "policy_label", "BudgetConfig", "ChatOptions",
    "GenerationConfig", "ModelPrice", "Precision",
]  # fmt: skip


# ---------------------------------------------------------------- run config
class ScoringConfig(Strict):
    window: int = Field(64, gt=0)
    sentence_aligned: bool = False
    # a language check tells its target apart from these (codes lingua can detect)
    languages: list[LanguageCode] = Field(default_factory=lambda: list(DEFAULT_CANDIDATE_LANGUAGES))
    # labelled replies (JSONL) the checks are measured on ("Estimators: corrected")
    validation: Path | None = None


ProbeBackend = Literal["auto", "vllm", "hf", "openai"]


class ProbeConfig(Strict):
    enabled: bool = True
    # hf: transformers, in `dtype` over the GPUs (device_map auto) or on the CPU; vllm: the
    # serving engine (extract_hidden_states, every layer); auto: vllm where the model and the
    # platform support that extraction, else hf. hf by default: an engine start costs more than a
    # small model's probe. openai: a served model's prompt log-probs (vLLM's completions
    # extension): next-token influence only, no hidden states (docs/architecture.md).
    backend: ProbeBackend = "hf"
    # the hf backend's precision; below float32 the run measures its rounding floor per layer
    # and leaves the positions under FLOOR_MULTIPLE x that floor out of fits and laws
    # (harness.probes.precision)
    dtype: Precision = "auto"
    # openai backend: the endpoint over generation's (`Endpoint.over`: None = generation's
    # base URL, else $OPENAI_BASE_URL; the served model generation's on the same server, else
    # the server's only model; generation's key variable), the top-k log-probs per token (the
    # server's max_logprobs caps it) and requests in flight
    base_url: BaseUrl = None
    served_model: ServedModel = None
    top_k: int = Field(20, gt=0)
    concurrency: int = Field(8, gt=0)
    baseline: Literal["none", "default", "text"] = "none"
    baseline_text: NonEmptyText | None = None
    layers: Literal["all"] | list[Annotated[int, Field(ge=0)]] = "all"
    t_min: int = Field(16, gt=0)
    untrained_twin: bool = False
    # at most this many samples per condition are probed (None: all); probing costs two
    # full forwards per sample per model
    samples: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _text_given(self) -> ProbeConfig:
        if self.baseline == "text" and not self.baseline_text:
            raise ValueError("baseline: 'text' needs baseline_text")
        if self.dtype != "auto" and self.backend in ("vllm", "openai"):
            raise ValueError(
                f"dtype {self.dtype} is the hf backend's (transformers); backend "
                f"'{self.backend}' keeps its engine's own dtype (set backend: hf, or dtype: auto)"
            )
        if self.backend == "openai" and self.untrained_twin:
            raise ValueError(
                "backend 'openai' probes the served model; its untrained twin is served "
                "nowhere (set untrained_twin: false, or probe with backend hf)"
            )
        return self


class ForksConfig(Strict):
    """Counterfactual forks (docs/architecture.md, "Forks"): at each continuation position t
    of a stored record, arm `with` (the record's prompt) and arm `without` (the baseline
    prompt) continue the same first t token ids for `tokens` tokens, `draws` seeded times."""

    at: list[Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    # or at the start of these assistant turns (k >= 2) of each conversation: the same history
    # with and without the system prompt, the only forks a chat endpoint can run (no prefill)
    at_turns: list[Annotated[int, Field(ge=2)]] | None = Field(
        None, min_length=1, exclude_if=is_unset
    )
    tokens: int = Field(64, gt=0)
    draws: int = Field(4, gt=0)
    records: int = Field(2, gt=0)  # forked samples per condition (the first ones)
    baseline: Literal["none", "default", "text"] = "none"
    baseline_text: NonEmptyText | None = None
    policies: list[NonEmptyText] | None = Field(None, min_length=1)  # None: every policy

    @field_validator("at", "at_turns")
    @classmethod
    def _increasing(cls, value: list[int] | None) -> list[int] | None:
        if value and any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(f"positions must be strictly increasing (got {value})")
        return value

    @model_validator(mode="after")
    def _text_given(self) -> ForksConfig:
        if self.baseline == "text" and not self.baseline_text:
            raise ValueError("baseline: 'text' needs baseline_text")
        if (self.at is None) == (self.at_turns is None):
            raise ValueError("forks need exactly one of at (positions) or at_turns (turns)")
        return self


class StatsConfig(Strict):
    """Every interval the harness writes (docs/architecture.md, "Statistics"): its level, the
    draws of what is still bootstrapped, and whether the gate-able adherence intervals are
    confidence sequences (valid however often a sequential run looks)."""

    level: float = Field(0.95, gt=0, lt=1)
    draws: int = Field(2000, ge=100)  # pooled alpha fits, pooled kappa, predictor AUROC
    anytime: bool = False
    # the gates' error over many checks (harness.config.gate_specs.Family): `holm` (default) and
    # `bonferroni` bound the chance that any verdict of the run's one-sided checks is wrong by
    # 1 - level; `none` bounds each bound's error alone by 1 - level (per check)
    family: Family = "holm"


class RelaySpec(Strict):
    prompt_len: int = Field(32, gt=0)
    layers: int = Field(4, gt=0, le=128)
    tokens: int = Field(100_000, ge=16)


class TheoryConfig(Strict):
    """The report's theory section: the relay model and alpha under attention bias."""

    relay: RelaySpec | None = None
    # alpha(lam) per layer: probe pairs re-run with the prompt-key bias; empty = skip
    bias_lams: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list)
    bias_samples: int = Field(1, gt=0)  # probed samples per item (policy `none` only)


class ConversationsConfig(Strict):
    """Run-wide settings of the conversations (docs/architecture.md, "Single-turn twins")."""

    # per scripted conversation without reminders: for every turn k >= 2, the first k user
    # turns and the sample's own first k - 1 replies sent as one user message, answered once,
    # so its reply starts about where turn k's does (single_turn.csv: tokens or turns?)
    twin: bool = False


class RunConfig(Strict):
    name: Annotated[str, Field(pattern=r"^[\w.-]+$")]
    models: list[NonEmptyText] = Field(min_length=1)
    suites: list[Path] = Field(min_length=1)
    items: list[str] | None = None  # subset of item ids; None: every item of every suite
    policies: list[PolicySpec] = Field(min_length=1)
    # Conversation items run under these when given (else under `policies`), so one config
    # compares within-reply policies on single replies and between-turn ones on conversations.
    conversation_policies: list[PolicySpec] | None = Field(None, min_length=1)
    # an int: that many samples per condition; {min, max, batch?}: sample until the gates decide
    samples: Annotated[int | SampleRange, BeforeValidator(sample_range)] = Field(4)
    generation: GenerationConfig = GenerationConfig()
    scoring: ScoringConfig = ScoringConfig()
    probe: ProbeConfig = ProbeConfig()
    theory: TheoryConfig = TheoryConfig()
    gates: list[GateSpec] = Field(default_factory=list)
    forks: ForksConfig | None = None
    conversations: ConversationsConfig | None = None
    stats: StatsConfig = StatsConfig()
    out: Path | None = None
    # hosted models' prices by model name, and the run's spending limits (engine chat); they
    # change what a run costs, never its results: both stay out of the run id
    pricing: dict[str, ModelPrice] | None = Field(None, exclude_if=is_unset)
    budget: BudgetConfig | None = Field(None, exclude_if=is_unset)

    @field_validator("policies", "conversation_policies", mode="before")
    @classmethod
    def _policy_shorthand(cls, value: Any) -> Any:
        # `- none` is shorthand for `- {name: none}`
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _policies_distinct(self) -> RunConfig:
        for field in ("policies", "conversation_policies"):
            problem = repeated_policy(getattr(self, field) or [], field)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _window_fits(self) -> RunConfig:
        if self.scoring.window > self.generation.max_tokens:
            raise ValueError(
                f"scoring.window ({self.scoring.window}) is larger than "
                f"generation.max_tokens ({self.generation.max_tokens})"
            )
        return self

    @field_validator("samples")
    @classmethod
    def _positive(cls, value: int | SampleRange) -> int | SampleRange:
        if isinstance(value, int) and value <= 0:
            raise ValueError("Input should be greater than 0")
        return value

    @property
    def sequential(self) -> SampleRange | None:
        """The sample range of a run that samples until decided (None: a fixed count)."""
        return self.samples if isinstance(self.samples, SampleRange) else None

    @property
    def first_samples(self) -> int:
        """Samples every condition gets (the fixed count, or the range's min)."""
        return self.samples.min if isinstance(self.samples, SampleRange) else self.samples

    @model_validator(mode="after")
    def _sequential_has_gates(self) -> RunConfig:
        if self.sequential and not any(g.metric in LOOP_METRICS for g in self.gates):
            raise ValueError(
                "samples: {min, max} samples until the gates decide, but the config has no "
                f"gate on {', '.join(LOOP_METRICS)} (add one, or give samples as a number)"
            )
        return self

    @model_validator(mode="after")
    def _gates_reachable(self) -> RunConfig:
        """A sequential run's one-sided gate that cannot pass by `samples.max` (every sample
        passing still leaves its bound inside the interval, at the run's loosest level) is
        refused before the run, with the max it needs (issue 54: `min: 0.99` by 157)."""
        samples = self.sequential
        for index, gate in enumerate(self.gates if samples else []):
            if not one_sided(gate):
                continue
            for side, bound in (("min", gate.min), ("max", gate.max)):
                needed = None if bound is None else max_needed(
                    float(bound), side, samples, 1 - self.stats.level)  # fmt: skip
                if needed is not None:
                    raise ValueError(
                        f"gates[{index}]: {gate.metric} {side} {bound:g} cannot pass by samples "
                        f"max {samples.max} (even every sample on its side leaves the bound "
                        f"inside the {self.stats.level:g} interval): "
                        + (
                            f"it needs max >= {needed[0]} ({needed[1]} surely reaches it)"
                            if needed[0]
                            else "no max reaches it"
                        )  # fmt: skip
                    )
        return self

    def policy_spec(self, label: str) -> PolicySpec | None:
        """The spec behind a policy label of this run (None: not one of its policies)."""
        specs = [*self.policies, *(self.conversation_policies or [])]
        return next((p for p in specs if policy_label(p) == label), None)

    def policy_labels(self) -> list[str]:
        """Every policy label of the run, in config order, each once."""
        specs = [*self.policies, *(self.conversation_policies or [])]
        return list(dict.fromkeys(policy_label(p) for p in specs))

    @model_validator(mode="after")
    def _gates_fit(self) -> RunConfig:
        labels = self.policy_labels()
        for index, gate in enumerate(self.gates):
            problem = gate_problem(
                gate, labels, list(self.models), self.probe.enabled, self.stats.family
            )
            if problem:
                raise ValueError(f"gates[{index}]: {problem}")
        return self

    @model_validator(mode="after")
    def _priced(self) -> RunConfig:
        if self.budget is not None and self.generation.engine != "chat":
            raise ValueError("budget: limits the requests of generation.engine: chat")
        if self.budget is not None and self.budget.usd is not None:
            missing = [m for m in self.models if m not in (self.pricing or {})]
            if missing:
                raise ValueError(
                    f"budget.usd needs a price for every model (pricing: has none for "
                    f"{', '.join(missing)})"
                )
        return self

    @model_validator(mode="after")
    def _forks_fit(self) -> RunConfig:
        labels = [policy_label(p) for p in self.policies]
        for label in (self.forks.policies or []) if self.forks else []:
            if label not in labels:
                raise ValueError(
                    f"forks.policies: '{label}' is not in the config's policies "
                    f"({', '.join(labels)})"
                )
        return self

    def run_id(self) -> str:
        """First 12 hex of sha256 of the config JSON, every field in it but `gates` and
        `scoring.validation`: they judge results without changing them (a threshold or a
        labelled file edited keeps the run)."""
        import hashlib

        # an unset `conversations` (added later) is left out: the runs before it keep their ids
        unset = {"conversations"} if self.conversations is None else set()
        text = self.model_dump_json(
            exclude={
                "gates": True, "scoring": {"validation"}, "pricing": True, "budget": True,
                **dict.fromkeys(unset, True),
            }
        )  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:12]
