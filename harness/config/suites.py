"""Task suites: the items a run evaluates (system prompt, user turns, checks), loaded from
YAML by `harness.config.files.load_suite`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from harness.checks import CheckSpec
from harness.checks.base import NonEmptyText
from harness.config.endpoint import DEFAULT_KEY_ENV, BaseUrl, KeyEnv, ServedModel
from harness.config.schema import Strict


class UserTurn(Strict):
    """A scripted user turn; `pressure` marks one that asks the model to break its system
    prompt (SysBench's "conflicting" turn): results are split by it."""

    user: NonEmptyText
    pressure: bool = False


def _turn_shorthand(value: Any) -> Any:
    # `- "text"` is shorthand for `- {user: "text"}`; anything else but a mapping is refused
    # with the one message a user can act on
    if isinstance(value, str):
        return {"user": value}
    if not isinstance(value, dict):
        raise ValueError(f"a turn must be a string or {{user, pressure}}, got {value!r}")
    return value


class UserSimulator(Strict):
    """A model that plays the user for `turns` more turns after the scripted ones: it sees the
    conversation with the roles swapped, under its own system prompt."""

    system: NonEmptyText
    turns: int = Field(gt=0)
    model: NonEmptyText | None = None  # None: the run's model (and its engine)
    engine: Literal["vllm", "hf", "openai"] | None = None  # None: the run's engine
    # openai engine: its endpoint over the run's (`Endpoint.over`: another base URL is
    # another server, a `model` other than the run's first another model: neither borrows
    # the run's served model)
    base_url: BaseUrl = None
    served_model: ServedModel = None
    api_key_env: KeyEnv = DEFAULT_KEY_ENV
    max_tokens: int = Field(64, gt=0)  # per simulated user turn


Replay = Literal["reference", "own"]


RENAMED_HISTORY = (
    "'history' was renamed 'log': the JSONL of logged conversations a replay item answers "
    "again (`history` now names only turns.csv's column); write 'log: PATH'"
)


def _one_or_list(value: Any) -> Any:
    # `replay: own` is shorthand for `replay: [own]`
    return [value] if isinstance(value, str) else value


class TaskItem(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*$")]
    system: NonEmptyText
    # None only on a replay item, whose user turns come from its `log`
    user: NonEmptyText | None = None
    checks: list[CheckSpec] = Field(min_length=1)
    # Optional: periodic/adaptive without a policy `text` and without a reminder repeat the
    # system prompt verbatim; `restate` needs a restatement (checked before the run).
    reminder: NonEmptyText | None = None
    restatement: NonEmptyText | None = None
    tags: list[str] = Field(default_factory=list)
    # Conversations: scripted user turns 2..K, then simulated ones (docs/architecture.md,
    # "Conversations"); both unset on single-reply items.
    turns: list[Annotated[UserTurn, BeforeValidator(_turn_shorthand)]] | None = Field(
        None, min_length=1
    )
    user_simulator: UserSimulator | None = None
    # Replay (docs/architecture.md, "Replay"): logged conversations (OpenAI chat JSONL, the
    # path relative to the suite file) whose user turns the model answers, each reply given
    # the logged history before it (`reference`) or its own (`own`). (`history` names only
    # whose replies came before a reply: turns.csv's column; the field was `history`.)
    log: Path | None = None
    replay: Annotated[list[Replay], BeforeValidator(_one_or_list), Field(min_length=1)] | None = (
        None
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_renamed(cls, data: Any) -> Any:
        # `history` means whose replies came before a reply (turns.csv); a suite that still
        # names its log so must be told, not read as an unknown field's generic error
        if isinstance(data, dict) and "history" in data:
            raise ValueError(RENAMED_HISTORY)
        return data

    @model_validator(mode="after")
    def _replay_or_script(self) -> TaskItem:
        if self.log is None:
            if self.replay is not None:
                raise ValueError("`replay` needs `log` (a JSONL of logged conversations)")
            if self.user is None:
                raise ValueError("field 'user' missing (only a replay item has none)")
            return self
        if self.replay is None:
            raise ValueError("`log` needs `replay`: reference, own, or [reference, own]")
        if len(set(self.replay)) != len(self.replay):
            raise ValueError(f"`replay` lists a history twice: {self.replay}")
        scripted = [name for name in ("user", "turns", "user_simulator") if getattr(self, name)]
        if scripted:
            raise ValueError(f"a replay item takes its user turns from `log`: drop `{scripted[0]}`")
        return self

    @property
    def is_replay(self) -> bool:
        return self.log is not None

    @property
    def is_conversation(self) -> bool:
        return self.turns is not None or self.user_simulator is not None or self.is_replay

    @property
    def n_turns(self) -> int:
        """User turns of a conversation, the first (`user`) included; 1 for a single reply."""
        simulated = self.user_simulator.turns if self.user_simulator else 0
        return 1 + len(self.turns or []) + simulated


class TaskSuite(Strict):
    suite: NonEmptyText
    description: str = ""
    items: list[TaskItem] = Field(min_length=1)
    # gates `harness score` checks on what it scored (a run's gates are its config's), each a
    # `harness.config.gate_specs.GateSpec` (validated by `config_files.load_suite`: the gates' layer
    # sits beside this one); left out of dumps when empty, so suites' digests stay the same
    gates: list[dict[str, Any]] = Field(default_factory=list, exclude_if=lambda g: not g)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskSuite:
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"duplicate item id '{item.id}'")
            seen.add(item.id)
        return self
