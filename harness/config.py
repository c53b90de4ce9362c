"""Pydantic models for run configs and task suites, loaded from YAML.

A wrong config raises `UserError` with one line naming the file, the field and what was
expected; the CLI turns that into exit code 2 before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import UserError
from harness.userfiles import read_user_text

# ISO 639-1 two-letter codes (from the ISO 639 register).
ISO_639_1 = frozenset(
    [
        "aa",
        "ab",
        "ae",
        "af",
        "ak",
        "am",
        "an",
        "ar",
        "as",
        "av",
        "ay",
        "az",
        "ba",
        "be",
        "bg",
        "bi",
        "bm",
        "bn",
        "bo",
        "br",
        "bs",
        "ca",
        "ce",
        "ch",
        "co",
        "cr",
        "cs",
        "cu",
        "cv",
        "cy",
        "da",
        "de",
        "dv",
        "dz",
        "ee",
        "el",
        "en",
        "eo",
        "es",
        "et",
        "eu",
        "fa",
        "ff",
        "fi",
        "fj",
        "fo",
        "fr",
        "fy",
        "ga",
        "gd",
        "gl",
        "gn",
        "gu",
        "gv",
        "ha",
        "he",
        "hi",
        "ho",
        "hr",
        "ht",
        "hu",
        "hy",
        "hz",
        "ia",
        "id",
        "ie",
        "ig",
        "ii",
        "ik",
        "io",
        "is",
        "it",
        "iu",
        "ja",
        "jv",
        "ka",
        "kg",
        "ki",
        "kj",
        "kk",
        "kl",
        "km",
        "kn",
        "ko",
        "kr",
        "ks",
        "ku",
        "kv",
        "kw",
        "ky",
        "la",
        "lb",
        "lg",
        "li",
        "ln",
        "lo",
        "lt",
        "lu",
        "lv",
        "mg",
        "mh",
        "mi",
        "mk",
        "ml",
        "mn",
        "mr",
        "ms",
        "mt",
        "my",
        "na",
        "nb",
        "nd",
        "ne",
        "ng",
        "nl",
        "nn",
        "no",
        "nr",
        "nv",
        "ny",
        "oc",
        "oj",
        "om",
        "or",
        "os",
        "pa",
        "pi",
        "pl",
        "ps",
        "pt",
        "qu",
        "rm",
        "rn",
        "ro",
        "ru",
        "rw",
        "sa",
        "sc",
        "sd",
        "se",
        "sg",
        "sh",
        "si",
        "sk",
        "sl",
        "sm",
        "sn",
        "so",
        "sq",
        "sr",
        "ss",
        "st",
        "su",
        "sv",
        "sw",
        "ta",
        "te",
        "tg",
        "th",
        "ti",
        "tk",
        "tl",
        "tn",
        "to",
        "tr",
        "ts",
        "tt",
        "tw",
        "ty",
        "ug",
        "uk",
        "ur",
        "uz",
        "ve",
        "vi",
        "vo",
        "wa",
        "wo",
        "xh",
        "yi",
        "yo",
        "za",
        "zh",
        "zu",
    ]
)
DEFAULT_CANDIDATE_LANGUAGES = [
    "en",
    "fr",
    "es",
    "de",
    "it",
    "pt",
    "nl",
    "ru",
    "pl",
    "sv",
    "tr",
    "zh",
]


class Strict(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _language_code(value: str) -> str:
    code = value.strip().lower()
    if code not in ISO_639_1:
        raise ValueError(f"'{value}' is not an ISO 639-1 language code (e.g. fr, de, ru)")
    return code


NonEmptyText = Annotated[str, Field(min_length=1, pattern=r"\S")]
Language = str  # validated against ISO_639_1 by _language_code


# ---------------------------------------------------------------- checks (task-suite side)
CheckScope = Literal["window", "response"]


def _lingua_code(value: str) -> str:
    code = _language_code(value)
    from harness.scoring.language import lingua_supports

    if not lingua_supports(code):
        raise ValueError(f"language '{code}' is not supported by the language detector (lingua)")
    return code


class LanguageCheck(Strict):
    type: Literal["language"]
    target: Language
    min_letters: int = Field(20, gt=0)
    threshold: float = Field(0.5, ge=0, le=1)
    _code = field_validator("target")(classmethod(lambda cls, v: _lingua_code(v)))


class IfevalCheck(Strict):
    type: Literal["ifeval"]
    id: NonEmptyText
    kwargs: dict[str, Any] = Field(default_factory=dict)
    scope: CheckScope | None = None  # None: the instruction's natural scope

    @model_validator(mode="after")
    def _in_registry(self) -> IfevalCheck:
        # Builds the instruction once, so an unknown id or kwargs that do not fit fail at load.
        from harness.scoring.ifeval import build_instruction

        build_instruction(self.id, dict(self.kwargs))
        return self


class RegexCheck(Strict):
    type: Literal["regex_must", "regex_must_not"]
    pattern: NonEmptyText
    ignore_case: bool = True
    scope: CheckScope = "window"
    name: Annotated[str, Field(pattern=r"^[\w.-]+$")] | None = None  # check id (default: pattern)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"regex does not compile: {exc}") from None
        return value


class PersonaCheck(Strict):
    type: Literal["persona"]
    name: NonEmptyText
    rivals: list[NonEmptyText] = Field(default_factory=list)
    scope: CheckScope = "response"  # window scope checks the rivals only


class ScriptCheck(Strict):
    type: Literal["script"]
    script: NonEmptyText  # Unicode script name, e.g. Cyrillic, Latin, Greek, Han
    min_share: float = Field(0.8, ge=0, le=1)
    min_letters: int = Field(20, gt=0)

    @field_validator("script")
    @classmethod
    def _known(cls, value: str) -> str:
        from harness.scoring.checks import SCRIPT_PREFIXES

        if value not in SCRIPT_PREFIXES:
            raise ValueError(
                f"unknown script '{value}' (expected one of {sorted(SCRIPT_PREFIXES)})"
            )
        return value


class MaxSentenceWordsCheck(Strict):
    type: Literal["max_sentence_words"]
    max_words: int = Field(gt=0)


CheckSpec = Annotated[
    LanguageCheck | IfevalCheck | RegexCheck | PersonaCheck | ScriptCheck | MaxSentenceWordsCheck,
    Field(discriminator="type"),
]


class TaskItem(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*$")]
    system: NonEmptyText
    user: NonEmptyText
    checks: list[CheckSpec] = Field(min_length=1)
    reminder: NonEmptyText
    restatement: NonEmptyText
    tags: list[str] = Field(default_factory=list)


class TaskSuite(Strict):
    suite: NonEmptyText
    description: str = ""
    items: list[TaskItem] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskSuite:
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"duplicate item id '{item.id}'")
            seen.add(item.id)
        return self


# ---------------------------------------------------------------- policies
Placement = Literal["system", "user", "inline"]


class NonePolicy(Strict):
    name: Literal["none"]


class RestatePolicy(Strict):
    name: Literal["restate"]


class PeriodicPolicy(Strict):
    name: Literal["periodic"]
    every: int = Field(gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None  # None: the task item's reminder


class AdaptivePolicy(Strict):
    name: Literal["adaptive"]
    every: int = Field(gt=0)
    placement: Placement = "user"
    text: NonEmptyText | None = None


class AttentionBiasPolicy(Strict):
    name: Literal["attention_bias"]
    lam: float = Field(ge=0)


PolicySpec = Annotated[
    NonePolicy | RestatePolicy | PeriodicPolicy | AdaptivePolicy | AttentionBiasPolicy,
    Field(discriminator="name"),
]
POLICY_NAMES = ("none", "restate", "periodic", "adaptive", "attention_bias")


def policy_label(policy: BaseModel) -> str:
    """Short stable label used in records and reports, e.g. `periodic-128-user`."""
    data = policy.model_dump(exclude_none=True)
    name = data.pop("name")
    data.pop("text", None)
    return "-".join([name, *(str(v) for v in data.values())])


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
    tensor_parallel_size: int = Field(1, gt=0)
    max_model_len: int | None = Field(None, gt=0)


class ScoringConfig(Strict):
    window: int = Field(64, gt=0)
    sentence_aligned: bool = False
    languages: list[Language] = Field(default_factory=lambda: list(DEFAULT_CANDIDATE_LANGUAGES))
    _codes = field_validator("languages")(
        classmethod(lambda cls, v: [_language_code(code) for code in v])
    )


class ProbeConfig(Strict):
    enabled: bool = True
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
        return self


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


class RunConfig(Strict):
    name: Annotated[str, Field(pattern=r"^[\w.-]+$")]
    models: list[NonEmptyText] = Field(min_length=1)
    suites: list[Path] = Field(min_length=1)
    items: list[str] | None = None  # subset of item ids; None: every item of every suite
    policies: list[PolicySpec] = Field(min_length=1)
    samples: int = Field(4, gt=0)
    generation: GenerationConfig = GenerationConfig()
    scoring: ScoringConfig = ScoringConfig()
    probe: ProbeConfig = ProbeConfig()
    theory: TheoryConfig = TheoryConfig()
    out: Path | None = None

    @field_validator("policies", mode="before")
    @classmethod
    def _policy_shorthand(cls, value: Any) -> Any:
        # `- none` is shorthand for `- {name: none}`
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _window_fits(self) -> RunConfig:
        if self.scoring.window > self.generation.max_tokens:
            raise ValueError(
                f"scoring.window ({self.scoring.window}) is larger than "
                f"generation.max_tokens ({self.generation.max_tokens})"
            )
        return self


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
    path = Path(path)
    return _validate(TaskSuite, path, _read_yaml(path))


def load_run_config(path: Path | str) -> RunConfig:
    """Parse and cross-check a run config: suites exist and parse, items exist, models are known."""
    from harness.models import parse_model_name

    path = Path(path)
    config: RunConfig = _validate(RunConfig, path, _read_yaml(path))
    suites = []
    for suite_path in config.suites:
        resolved = suite_path if suite_path.is_absolute() else _relative(path, suite_path)
        if not resolved.is_file():
            raise UserError(f"{path}: field 'suites': {suite_path}: file not found")
        suites.append(load_suite(resolved))
    for model in config.models:
        try:
            parse_model_name(model)
        except UserError as exc:
            raise UserError(f"{path}: field 'models': {exc}") from None
    known = {item.id for suite in suites for item in suite.items}
    for item_id in config.items or []:
        if item_id not in known:
            raise UserError(f"{path}: field 'items': no task item '{item_id}' in the suites")
    return config


def _relative(config_path: Path, suite_path: Path) -> Path:
    """Suite paths are relative to the working directory, else to the config's folder."""
    if suite_path.exists():
        return suite_path
    beside = config_path.parent / suite_path
    return beside if beside.exists() else suite_path
