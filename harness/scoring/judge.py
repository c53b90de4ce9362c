"""The judge runner: judge checks' verdicts, one engine batch per check per round, cached.

A `JudgeRunner` is opened around one scoring pass (the score stage, `harness score`). It
resolves each check's judge (`JudgeSpec`, defaulting to the run's first model on the run's
generation engine) to a `JudgeTarget`, creates that target's engine on first need with
`make_engine` and the options the generate stage would use, and closes every engine when the
pass ends (`close`, or leaving the `with` block): an idle vLLM engine keeps its CPU workers
spinning.

Verdicts are cached in the run's store as `cache/judge/<key>.json`, key = `unit_key("judge")`
of model = the judge's identity, inputs = [rule, text], params = {rubric: RUBRIC_VERSION}; the
identity is (engine, model content key) for a local judge and (openai, base URL, served
model, tokenizer content key) for an endpoint. So a resumed run, or a re-run of an edited
config into the same folder, never asks a judge twice about the same text, even when the
score unit of the record was invalidated by another change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.capabilities import Capability
from harness.checks.base import CheckResult
from harness.checks.judge import (
    JUDGE_MAX_TOKENS,
    RUBRIC_SYSTEM,
    RUBRIC_VERSION,
    VERDICT_PREFILL,
    JudgeCheck,
    JudgeSpec,
    MalformedVerdict,
    parse_verdict,
    rubric_user_message,
    verdict_result,
)
from harness.config.endpoint import endpoint_of, server_url
from harness.config.run import GenerationConfig
from harness.engines import (
    ENGINES,
    GenerationRequest,
    SamplingSettings,
    engine_can,
    engine_folder,
    kind_can,
    make_engine,
)
from harness.engines.options import engine_options, model_of
from harness.errors import UserError
from harness.models import ResolvedModel, locate_model, model_files
from harness.store import unit_key
from harness.text.chat import ChatFormat

STAGE = "judge"
Resolve = Callable[[str], ResolvedModel]


@dataclass(frozen=True)
class JudgeDefaults:
    """What a judge spec leaves out: the run's first model and its generation config."""

    model: str
    generation: GenerationConfig


@dataclass(frozen=True)
class JudgeTarget:
    """One judge as run: engine kind, zoo model (openai: the tokenizer), engine options."""

    engine: str
    model: str
    options: tuple[tuple[str, Any], ...]
    identity: tuple[str, ...]  # what verdict cache keys hold


def _default_resolve(name: str) -> ResolvedModel:
    # located, not built: a judge's identity needs its content key; its engine builds it
    return locate_model(name)


def judge_target(spec: JudgeSpec, defaults: JudgeDefaults, resolve: Resolve) -> JudgeTarget:
    """The spec with the run's defaults filled in: no engine = the run's engine with all its
    options; an engine of its own takes its endpoint over the run's (`Endpoint.over`: the
    run's served model only for the run's own model on the run's server)."""
    gen = defaults.generation
    if spec.engine is not None:
        same_model = spec.model is None or spec.model == defaults.model
        endpoint = endpoint_of(spec).over(endpoint_of(gen), same_model=same_model)
        gen = gen.model_copy(update={"engine": spec.engine, **endpoint.model_dump()})
    name = spec.model or defaults.model
    hosted = not engine_can(gen, Capability.LOCAL_WEIGHTS)
    model = model_of(name, gen) if hosted else resolve(name)
    options = engine_options(gen, name)
    if hosted:  # the endpoint and the model it is asked for
        # hashable (a target is a dict key): the extra body as its JSON text
        options = {k: v for k, v in options.items() if k != "cache_dir"}
        options["extra_body"] = json.dumps(options["extra_body"], sort_keys=True)
        identity = (gen.engine, server_url(gen.base_url, gen.protocol) or "", str(options["model"]))
        if gen.protocol != "openai":  # another protocol asks otherwise (a verdict prefill)
            identity += (gen.protocol,)
    elif "base_url" in options:  # an endpoint serving a local model's tokens
        url = options.get("base_url") or os.environ.get("OPENAI_BASE_URL", "")
        identity = (gen.engine, url, gen.served_model or "", model.content_key)
    else:
        identity = (gen.engine, model.content_key)
    return JudgeTarget(gen.engine, model.name, tuple(sorted(options.items())), identity)


def verdict_key(target: JudgeTarget, rule: str, text: str) -> str:
    """The verdict cache key: rubric version, judge identity, rule and text (nothing else)."""
    params = {"rubric": RUBRIC_VERSION}
    return unit_key(STAGE, model=list(target.identity), inputs=[rule, text], params=params)


def _judge_sampling():
    return SamplingSettings(temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)


class JudgeRunner:
    """Judge verdicts for a scoring pass; engines created lazily, once per target."""

    def __init__(
        self,
        store,
        defaults: JudgeDefaults,
        engine_factory: Callable[..., Any] | None = None,
        resolve: Resolve | None = None,
        budget_of: Callable[[str], Any] | None = None,
        request_cache: Path | None = None,
    ) -> None:
        self.store = store  # get / put of JSON units (a RunStore)
        self.defaults = defaults
        self._engine_factory = engine_factory
        self._resolve = resolve or _default_resolve
        # a chat judge spends from the run's budget of its model (`budget_of(model name)`,
        # shared with generation) and keeps each answer in the run's request cache
        self._budget_of = budget_of
        self._request_cache = request_cache
        self._targets: dict[JudgeSpec, JudgeTarget] = {}
        self._engines: dict[JudgeTarget, tuple[Any, Any]] = {}  # target -> (engine, chat)

    def __enter__(self) -> JudgeRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def target(self, spec: JudgeSpec) -> JudgeTarget:
        if spec not in self._targets:
            self._targets[spec] = judge_target(spec, self.defaults, self._resolve)
        return self._targets[spec]

    def identities(self, checks: Iterable) -> list[list[str]]:
        """The judge identities of the judge checks among `checks` (for score unit keys)."""
        return [list(self.target(c.judge).identity) for c in checks if isinstance(c, JudgeCheck)]

    def verdicts(self, check: JudgeCheck, texts: Sequence[str]) -> list[CheckResult]:
        """One result per text. Cached verdicts are reused; the rest (each distinct text once)
        go to the judge in one batch, the malformed ones again in a second batch."""
        target = self.target(check.judge)
        keys = [verdict_key(target, check.criterion, text) for text in texts]
        found: dict[str, dict] = {}
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in found or key in todo or not text.strip():
                continue
            cached = self.store.get(STAGE, key)
            if cached is not None:
                found[key] = cached
            else:
                todo[key] = text
        if todo:
            found.update(self._ask(target, check.criterion, todo))
        return [verdict_result(found.get(k), t) for k, t in zip(keys, texts, strict=True)]

    def _ask(self, target: JudgeTarget, rule: str, todo: dict[str, str]) -> dict[str, dict]:
        """Round 1 asks every text; round 2 asks the malformed ones again with a stricter
        reminder line; still malformed = undetermined. Verdicts are stored per round."""

        engine, chat = self._engine(target)
        sampling = _judge_sampling()
        answers: dict[str, dict] = {}
        spent: dict[str, tuple[int, ...]] = {}
        pending = dict(todo)
        for attempt in (1, 2):
            prefill = _takes_prefill(engine)
            prompts, too_long = _prompts(
                chat, rule, pending, attempt > 1, engine.max_model_len, prefill
            )
            answers.update(too_long)  # not stored: no judge was asked
            if not prompts:
                break
            requests = [GenerationRequest(prompt_ids=ids, sampling=sampling) for _, ids in prompts]
            outputs = engine.generate(requests)
            pending = {}
            for (key, _), output in zip(prompts, outputs, strict=True):
                if output.api_tokens is not None:  # a hosted judge: what the endpoint billed
                    paid = spent.get(key, (0, 0, 0))
                    spent[key] = tuple(a + b for a, b in zip(paid, output.api_tokens, strict=True))
                answer = _answer(output.text, attempt, prefill)
                if answer is None:  # malformed on the first try: ask once more
                    pending[key] = todo[key]
                    continue
                if key in spent:  # both attempts' tokens (cost per condition: manifest.json)
                    answer["api_tokens"] = list(spent[key])
                answers[key] = answer
                self.store.put(STAGE, key, answer)
            if not pending:
                break
        return answers

    def _engine(self, target: JudgeTarget):
        if target not in self._engines:
            factory = self._engine_factory or make_engine
            hosted = not kind_can(target.engine, Capability.LOCAL_WEIGHTS)
            path = None if hosted else engine_folder(target.engine, self._resolve(target.model))
            options = dict(target.options)
            if kind_can(target.engine, Capability.METERED):
                options["cache_dir"] = self._request_cache
                options["budget"] = self._budget_of(target.model) if self._budget_of else None
            engine = factory(target.engine, path, **options)
            self._engines[target] = (engine, ChatFormat(engine.tokenizer))
        return self._engines[target]

    def close(self) -> None:
        engines, self._engines = self._engines, {}
        for engine, _ in engines.values():
            engine.close()


def judge_spend(runner: JudgeRunner, jobs: Iterable[tuple]) -> dict[tuple, dict[str, list[int]]]:
    """Per condition (model, item, policy) and judge model: [requests, input, cached input,
    output] tokens a hosted judge billed for the condition's texts, from the stored verdicts'
    `api_tokens` (`jobs`: (check, row columns, text) as scoring makes them). A verdict is
    counted once, under the first condition that asked it: its request was paid once."""
    seen: set[str] = set()
    out: dict[tuple, dict[str, list[int]]] = {}
    for check, where, text in jobs:
        if not isinstance(check, JudgeCheck) or not text.strip():
            continue
        target = runner.target(check.judge)
        key = verdict_key(target, check.rule, text)
        if key in seen:
            continue
        seen.add(key)
        verdict = runner.store.get(STAGE, key) or {}
        if not verdict.get("api_tokens"):
            continue
        condition = (where["model"], where["item"], where["policy"])
        row = out.setdefault(condition, {}).setdefault(target.model, [0, 0, 0, 0])
        row[0] += int(verdict.get("attempts", 1))
        for i, n in enumerate(verdict["api_tokens"], start=1):
            row[i] += int(n)
    return out


def _takes_prefill(engine) -> bool:
    """Whether the judge's answer can be started for it (`VERDICT_PREFILL`): not on a
    chat-completions endpoint, which takes no assistant prefill (the chat engine's
    `takes_prefill`: only its Anthropic protocol does); there the rubric's own instruction to
    answer with one JSON object stands alone, and the verdict is read from the whole answer."""
    return getattr(engine, "takes_prefill", getattr(engine, "name", "") != "chat")


def _prompts(
    chat, rule: str, texts: dict[str, str], strict: bool, context: int, prefill: bool = True
):
    """([(key, prompt ids)] of the texts whose prompt + verdict budget fit the judge's
    context, {key: undetermined verdict} of the others)."""
    prompts: list[tuple[str, list[int]]] = []
    too_long: dict[str, dict] = {}
    for key, text in texts.items():
        user = rubric_user_message(rule, text, strict)
        ids = chat.prompt_ids(RUBRIC_SYSTEM, user)
        ids += chat.encode(VERDICT_PREFILL) if prefill else []
        if len(ids) + JUDGE_MAX_TOKENS > context:
            reason = f"text too long for the judge's context ({len(ids)} prompt tokens)"
            too_long[key] = {"pass": None, "reason": reason}
        else:
            prompts.append((key, ids))
    return prompts, too_long


def _answer(output: str, attempt: int, prefill: bool = True) -> dict | None:
    """The stored verdict for one output; None when malformed on a first attempt."""
    # the prefill is part of the verdict the judge wrote
    text = VERDICT_PREFILL + output if prefill else output
    try:
        verdict = parse_verdict(text)
    except MalformedVerdict as exc:
        if attempt == 1:
            return None
        snippet = " ".join(output.split())[:80]
        reason = f"judge verdict malformed: {exc} (output: {snippet!r})"
        return {"pass": None, "reason": reason, "output": output, "attempts": attempt}
    return {"pass": verdict.passed, "reason": verdict.reason, "output": output, "attempts": attempt}


def judge_checks_of(items: Iterable) -> list[tuple[str, JudgeCheck]]:
    """(where, check) for every judge check of these task items."""
    return [
        (f"item '{item.id}', check '{check.base_id}'", check)
        for item in items
        for check in item.checks
        if isinstance(check, JudgeCheck)
    ]


def check_judges(
    defaults: JudgeDefaults,
    checks: Iterable[tuple[str, JudgeCheck]],
    resolve: Resolve | None = None,
) -> None:
    """Pre-flight, before anything is written: every judge model resolves and has a chat
    template, every openai endpoint answers and serves the model. UserError naming the check."""

    resolve = resolve or _default_resolve
    seen: set[JudgeTarget] = set()
    for where, check in checks:
        try:
            target = judge_target(check.judge, defaults, resolve)
            if target in seen:
                continue
            seen.add(target)
            if not kind_can(target.engine, Capability.LOCAL_WEIGHTS):
                continue  # a hosted model: no folder to read; nothing is sent before the run
            files = model_files(resolve(target.model))  # its tokenizer; no model is built
            if ENGINES.lookup(target.engine).preflight is not None:  # an endpoint: reachable?
                engine = make_engine(target.engine, files, **dict(target.options))
                try:
                    ChatFormat(engine.tokenizer)
                finally:
                    engine.close()
            else:
                from transformers import AutoTokenizer

                ChatFormat(AutoTokenizer.from_pretrained(files))
        except UserError as exc:
            raise UserError(f"{where}: judge: {exc}") from None
