"""Pydantic models for run configs, and the loaders of run configs and task suites (the suite
schema is `harness.suites`, the policy specs `harness.policy_specs`; their models are
re-exported here for the callers).

A wrong config raises `UserError` with one line naming the file, the field and what was
expected; the CLI turns that into exit code 2 before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.checks.base import NonEmptyText
from harness.checks.language import DEFAULT_CANDIDATE_LANGUAGES, LanguageCode
from harness.errors import UserError
from harness.gate_specs import LOOP_METRICS, GateSpec, gate_problem
from harness.models import parse_model_name
from harness.policy_specs import (
    BASELINE,
    POLICY_NAMES,
    AdaptivePolicy,
    AttentionBiasPolicy,
    NonePolicy,
    PeriodicPolicy,
    Placement,
    PolicySpec,
    RestatePolicy,
    policy_label,
    repeated_policy,
)
from harness.sampling import SampleRange, sample_range
from harness.schema import Strict
from harness.suites import TaskItem, TaskSuite, UserSimulator, UserTurn
from harness.userfiles import read_user_text

# re-exported: the suite models (harness.suites) and the policy specs (harness.policy_specs)
__all__ = [
    "BASELINE", "POLICY_NAMES", "AdaptivePolicy", "AttentionBiasPolicy", "NonePolicy",
    "PeriodicPolicy", "Placement", "PolicySpec", "RestatePolicy", "TaskItem", "TaskSuite",
    "UserSimulator", "UserTurn", "policy_label",
]  # fmt: skip


# ---------------------------------------------------------------- run config
class GenerationConfig(Strict):
    engine: Literal["vllm", "hf", "openai"] = "vllm"
    max_tokens: int = Field(512, gt=0)
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    seed: int = 0
    continue_on_eos: bool = False
    base_url: str | None = None  # openai engine; else $OPENAI_BASE_URL
    served_model: str | None = (
        None  # openai engine: the server's model name (default: its only one)
    )
    api_key_env: str = "OPENAI_API_KEY"
    # vLLM only (generation and the probe's vllm backend): GPUs per layer / layer stages
    tensor_parallel_size: int = Field(1, gt=0)
    pipeline_parallel_size: int = Field(1, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    # Conversations: max new tokens per assistant turn (a turn ends at EOS or here);
    # max_tokens stays the conversation's total budget of generated tokens.
    turn_tokens: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _turn_fits(self) -> GenerationConfig:
        if self.turn_tokens is not None and self.turn_tokens > self.max_tokens:
            raise ValueError(
                f"turn_tokens ({self.turn_tokens}) is larger than max_tokens ({self.max_tokens})"
            )
        return self


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
    # hf: transformers (float32 on CPU, bf16 over the GPUs on CUDA); vllm: the serving engine
    # (extract_hidden_states, every layer); auto: vllm where the model and the platform
    # support that extraction, else hf. hf by default: an engine start costs more than a
    # small model's probe. openai: a served model's prompt log-probs (vLLM's completions
    # extension): next-token influence only, no hidden states (docs/architecture.md).
    backend: ProbeBackend = "hf"
    # openai backend: the endpoint (None: generation.base_url, else $OPENAI_BASE_URL), the
    # served model's name (None: generation.served_model, else the server's only model), the
    # top-k log-probs per token (the server's max_logprobs caps it) and requests in flight
    base_url: str | None = None
    served_model: str | None = None
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

    at: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    tokens: int = Field(64, gt=0)
    draws: int = Field(4, gt=0)
    records: int = Field(2, gt=0)  # forked samples per condition (the first ones)
    baseline: Literal["none", "default", "text"] = "none"
    baseline_text: NonEmptyText | None = None
    policies: list[NonEmptyText] | None = Field(None, min_length=1)  # None: every policy

    @field_validator("at")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(f"positions must be strictly increasing (got {value})")
        return value

    @model_validator(mode="after")
    def _text_given(self) -> ForksConfig:
        if self.baseline == "text" and not self.baseline_text:
            raise ValueError("baseline: 'text' needs baseline_text")
        return self


class StatsConfig(Strict):
    """Every interval the harness writes (docs/architecture.md, "Statistics"): its level, the
    draws of what is still bootstrapped, and whether the gate-able adherence intervals are
    confidence sequences (valid however often a sequential run looks)."""

    level: float = Field(0.95, gt=0, lt=1)
    draws: int = Field(2000, ge=100)  # pooled alpha fits, pooled kappa, predictor AUROC
    anytime: bool = False


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
            problem = gate_problem(gate, labels, list(self.models), self.probe.enabled)
            if problem:
                raise ValueError(f"gates[{index}]: {problem}")
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
            exclude={"gates": True, "scoring": {"validation"}, **dict.fromkeys(unset, True)}
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]


# ---------------------------------------------------------------- loading
def _format_error(path: Path, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"] if not str(part).startswith("function-"))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "union_tag_invalid":
        kind = "policy" if "policies" in loc else "check type"
        msg = f"unknown {kind}: {err['ctx']['tag']!r}"
        msg += f" (expected one of {err['ctx']['expected_tags']})"
    elif err["type"] == "union_tag_not_found":
        msg = f"missing '{err['ctx']['discriminator'].strip(chr(39))}'"
    where = f" field '{loc}':" if loc else ""
    return f"{path}:{where} {msg}"


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        data = yaml.safe_load(read_user_text(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}:{line} not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _validate(model: type[BaseModel], path: Path, data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_error(path, exc)) from None


def load_suite(path: Path | str) -> TaskSuite:
    """A suite; a replay item's `history` is made absolute (it is relative to the suite file)
    and must be a file."""
    path = Path(path)
    suite = _validate(TaskSuite, path, _read_yaml(path))
    for index, item in enumerate(suite.items):
        if item.history is None:
            continue
        resolved = item.history if item.history.is_absolute() else path.parent / item.history
        if not resolved.is_file():
            where = f"field 'items.{index}.history'"
            raise UserError(f"{path}: item '{item.id}': {where}: {item.history}: file not found")
        suite.items[index] = item.model_copy(update={"history": resolved.resolve()})
    return suite


def load_run_config(path: Path | str) -> RunConfig:
    """Parse and cross-check a run config (see `load_run_config_and_suites`)."""
    return load_run_config_and_suites(path)[0]


def load_run_config_and_suites(path: Path | str) -> tuple[RunConfig, list[TaskSuite]]:
    """Parse and cross-check a run config: suites exist and parse, items exist, models are
    known. Returns the suites too, so a run parses each suite file once."""

    path = Path(path)
    config: RunConfig = _validate(RunConfig, path, _read_yaml(path))
    suites, suite_files = [], []
    for suite_path in config.suites:
        resolved = suite_path if suite_path.is_absolute() else _relative(path, suite_path)
        if not resolved.is_file():
            raise UserError(f"{path}: field 'suites': {suite_path}: file not found")
        suites.append(load_suite(resolved))
        suite_files.append(resolved)
    for model in config.models:
        try:
            parse_model_name(model)
        except UserError as exc:
            raise UserError(f"{path}: field 'models': {exc}") from None
    for suite_path, suite in zip(suite_files, suites, strict=True):
        for index, item in enumerate(suite.items):  # a simulated user's model is a zoo name
            sim = item.user_simulator
            if sim is not None and sim.model is not None:
                try:
                    parse_model_name(sim.model)
                except UserError as exc:
                    where = f"field 'items.{index}.user_simulator.model'"
                    raise UserError(f"{suite_path}: item '{item.id}': {where}: {exc}") from None
    known = {item.id for suite in suites for item in suite.items}
    for item_id in config.items or []:
        if item_id not in known:
            raise UserError(f"{path}: field 'items': no task item '{item_id}' in the suites")
    run_items = config.items or [item.id for suite in suites for item in suite.items]
    for index, gate in enumerate(config.gates):
        for item_id in gate.items or []:
            if item_id not in run_items:
                raise UserError(f"{path}: gates[{index}]: item '{item_id}' is not in the run")
    return config, suites


def _relative(config_path: Path, suite_path: Path) -> Path:
    """Suite paths are relative to the working directory, else to the config's folder."""
    if suite_path.exists():
        return suite_path
    beside = config_path.parent / suite_path
    return beside if beside.exists() else suite_path
