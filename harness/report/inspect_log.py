"""`harness export DIR --format inspect`: a run folder, or a scored chat log, as an Inspect AI
eval log (`inspect view` browses it; `inspect_ai.log.read_eval_log` reads it).

Schema (inspect_ai 0.3.285, `inspect_ai/log/_log.py`): one `EvalLog` (status `success`) whose
`eval` names the run (task = the suites, model = the run's model(s), dataset = the samples),
one `EvalSample` per generation (a run: generations.jsonl) or per logged conversation (a scored
log: the log the folder's manifest.json names, its turns in turns.csv), with

- `messages`: the conversation as the model read it: the prompt's system and user messages,
  each assistant reply, the user turns between them (and a reminder the policy injected, as a
  user message marked `source: reminder`); for a log, its own messages (tool calls and results
  kept);
- `scores`: one `Score` per check: value = the share of its decided windows (a run) or turns
  (a log) that passed, `N` (Inspect's "no answer") when none decided; explanation = the first
  failing window or turn and its reason;
- `metadata`: model, task, item, policy, seed, sample (and history, conversation id);

and `results.scores`: one `EvalScore` per check, metrics `mean` (over samples) and `mean[P]`
per policy P; `results.metadata.adherence` holds adherence.csv's rows (the run's summary).
Written with Inspect's own writer, so the file is exactly what Inspect reads.
"""

from __future__ import annotations

import datetime
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import UserError
from harness.interop import read_conversations
from harness.report.load import load_run
from harness.results import TurnRow, WindowRow
from harness.text.records import GenerationRecord

SAMPLE_KEYS = ("model", "task", "item", "policy", "seed", "sample")
NO_ANSWER = "N"  # inspect_ai.scorer.NOANSWER: a check that decided nothing in this sample


def _inspect():
    try:
        import inspect_ai.log as log  # lazy: optional extra, large import
        import inspect_ai.model as model  # lazy: optional extra, large import
        import inspect_ai.scorer as scorer  # lazy: optional extra, large import
    except ImportError:
        raise UserError(
            "--format inspect needs inspect-ai: pip install -e '.[inspect]' (scripts/setup.sh "
            "installs it)"
        ) from None
    return log, model, scorer


def export_inspect(run_dir: Path, out: Path | None = None) -> Path:
    """Write the folder as one .eval file (default DIR/inspect/harness.eval); returns its path."""
    ilog, _, _ = _inspect()
    data = load_run(run_dir)
    manifest = data.manifest or {}
    if data.generations:
        windows = data.frame("windows.csv")
        if windows is None:
            raise UserError(f"{run_dir}: {data.missing('windows.csv')} (export needs the scores)")
        samples = list(_run_samples(data.generations, windows))
    elif manifest.get("command") == "score" and manifest.get("log"):
        turns = data.frame("turns.csv")
        if turns is None:
            raise UserError(f"{run_dir}: {data.missing('turns.csv')} (export needs the scores)")
        log = Path(manifest["log"])
        samples = list(_log_samples(log, manifest.get("log_format", "auto"), turns))
    else:
        raise UserError(
            f"{run_dir}: neither a run (no generations.jsonl) nor a scored chat log (no "
            "manifest.json naming its log)"
        )
    eval_log = _eval_log(ilog, run_dir, manifest, samples, data.frame("adherence.csv"))
    path = Path(out) if out is not None else Path(run_dir) / "inspect" / "harness.eval"
    path.parent.mkdir(parents=True, exist_ok=True)
    ilog.write_eval_log(eval_log, str(path), format="eval" if path.suffix != ".json" else "json")
    return path


def _eval_log(ilog, run_dir: Path, manifest: dict, samples: list, adherence) -> Any:
    models = sorted({s.metadata["model"] for s in samples}) or ["unknown"]
    tasks = sorted({s.metadata["task"] for s in samples if s.metadata["task"]})
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    spec = ilog.EvalSpec(
        created=created,
        task="harness/" + ("+".join(tasks) or Path(run_dir).name),
        run_id=str(manifest.get("run_id", Path(run_dir).name)),
        dataset=ilog.EvalDataset(name=Path(run_dir).name, location=str(run_dir),
                                 samples=len(samples), sample_ids=[s.id for s in samples]),
        model=models[0] if len(models) == 1 else "+".join(models),
        config=ilog.EvalConfig(),
        metadata={"harness_folder": str(run_dir), "models": models},
    )  # fmt: skip
    results = ilog.EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples),
        scores=_eval_scores(ilog, samples),
        metadata={"adherence": _records(adherence)},
    )
    return ilog.EvalLog(status="success", eval=spec, results=results, samples=samples)


def _eval_scores(ilog, samples: list) -> list:
    """Per check: the mean score over the samples that have a number, and per policy."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unscored: dict[str, int] = defaultdict(int)
    for sample in samples:
        for check, score in (sample.scores or {}).items():
            if isinstance(score.value, float):
                values[check][sample.metadata["policy"]].append(score.value)
            else:
                unscored[check] += 1
    out = []
    for check in sorted(set(values) | set(unscored)):
        by_policy = values[check]
        every = [v for vs in by_policy.values() for v in vs]
        metrics = {"mean": _metric(ilog, "mean", every)}
        metrics |= {f"mean[{p}]": _metric(ilog, f"mean[{p}]", vs) for p, vs in by_policy.items()}
        out.append(
            ilog.EvalScore(name=check, scorer=check, scored_samples=len(every),
                           unscored_samples=unscored[check], metrics=metrics)
        )  # fmt: skip
    return out


def _metric(ilog, name: str, values: list[float]):
    return ilog.EvalMetric(name=name, value=sum(values) / len(values) if values else math.nan)


def _records(frame) -> list[dict]:
    if frame is None:
        return []
    return json.loads(frame.to_json(orient="records"))  # NaN -> null, numpy -> JSON


def _run_samples(generations: list[dict], windows: pd.DataFrame) -> Iterator[Any]:
    _, imodel, iscorer = _inspect()
    by_sample = _scores_by(windows, WindowRow, "window")
    for raw in generations:
        record = GenerationRecord.model_validate(raw)
        key = tuple(str(getattr(record, k)) for k in SAMPLE_KEYS)
        messages = _record_messages(imodel, record)
        ident = f"{record.model}/{record.item}/{record.policy}/{record.seed}/{record.sample}"
        meta = {k: getattr(record, k) for k in SAMPLE_KEYS} | {
            "history": record.history or "generated",
            "conversation_id": record.conversation_id or "",
        }
        yield _sample(imodel, iscorer, ident, messages, by_sample.get(key, {}), meta)


def _log_samples(log: Path, fmt: str, turns: pd.DataFrame) -> Iterator[Any]:
    _, imodel, iscorer = _inspect()
    turns = turns.assign(conversation_id=turns["conversation_id"].astype(str))
    by_conversation = _scores_by(turns, TurnRow, "turn", keys=("conversation_id",))
    first = turns.drop_duplicates("conversation_id").set_index("conversation_id")
    for conversation in read_conversations(log, fmt):
        if conversation.id not in first.index:
            continue  # not scored (no reply to score)
        row = first.loc[conversation.id]
        messages = [_message(imodel, m) for m in conversation.messages]
        meta = {k: row[k] for k in SAMPLE_KEYS} | {
            "history": "logged",
            "conversation_id": conversation.id,
            "where": conversation.where,
        }
        meta = json.loads(json.dumps(meta, default=str))  # numpy scalars -> JSON
        scores = by_conversation.get((conversation.id,), {})
        yield _sample(imodel, iscorer, conversation.id, messages, scores, meta)


def _sample(imodel, iscorer, ident: str, messages: list, scores: dict, meta: dict):
    from inspect_ai.log import EvalSample  # lazy: optional extra, large import

    first_reply = next((k for k, m in enumerate(messages) if m.role == "assistant"), None)
    replies = [m.text for m in messages if m.role == "assistant" and m.text]
    return EvalSample(
        id=ident, epoch=1, input=messages[:first_reply] if first_reply else messages,
        target="", messages=messages,
        output=imodel.ModelOutput.from_content(model=str(meta["model"]),
                                               content=replies[-1] if replies else ""),
        scores={check: iscorer.Score(**fields) for check, fields in scores.items()},
        metadata=meta,
    )  # fmt: skip


def _scores_by(
    frame: pd.DataFrame, row, unit: str, keys: Iterable[str] = SAMPLE_KEYS
) -> dict[tuple, dict[str, dict]]:
    """{sample key: {check: Score fields}} from windows.csv (unit `window`) or turns.csv
    (unit `turn`): the share of decided units that passed; the first failing one explains."""
    keys = list(keys)
    frame = frame.assign(_decided=frame["passed"].astype(str).str.lower().isin(["true", "false"]))
    frame = frame.assign(_passed=frame["passed"].astype(str).str.lower() == "true")
    out: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for (*key, check), group in frame.groupby([*keys, "check"], sort=False):
        decided = group[group["_decided"]]
        failed = decided[~decided["_passed"]]
        fields: dict[str, Any] = {
            "value": float(decided["_passed"].mean()) if len(decided) else NO_ANSWER,
            "metadata": {"decided": len(decided), "failed": len(failed), "units": unit},
        }
        if len(failed):
            where = failed.iloc[0]
            fields["explanation"] = f"{unit} {where[unit]} failed: {where['reason']}"
        elif not len(decided):
            fields["explanation"] = f"no {unit} decided: {group.iloc[0]['reason']}"
        out[tuple(str(k) for k in key)][str(check)] = fields
    return out


def _record_messages(imodel, record: GenerationRecord) -> list:
    """The conversation the model read: prompt messages, then the continuation's segments in
    order (chat markup left out; consecutive spans of one role joined)."""
    messages = [_message(imodel, m) for m in record.prompt_messages]
    spans: list[tuple[str, str, str]] = []  # (role, source, text)
    roles = {"generated": "assistant", "logged": "assistant", "user": "user"}
    for seg in record.segments:
        if seg.kind == "markup" or not seg.text:
            continue
        role, source = roles.get(seg.kind, "user"), seg.source
        if spans and spans[-1][0] == role and role == "assistant":
            spans[-1] = (role, source, spans[-1][2] + seg.text)
        else:
            spans.append((role, source, seg.text))
    if not spans and record.text:
        spans.append(("assistant", "model", record.text))
    for role, source, text in spans:
        meta = None if source in ("model", "user", "log") else {"source": source}
        messages.append(_message(imodel, {"role": role, "content": text}, meta))
    return messages


def _message(imodel, message, metadata: dict | None = None):
    """One message (a prompt dict or a logged conversation's message) as Inspect's type."""
    if isinstance(message, dict):
        role, content, calls, call_id = message["role"], message["content"], (), None
    else:
        role, content = message.role, message.content
        calls, call_id = message.tool_calls, message.tool_call_id or message.name
    if role == "system":
        return imodel.ChatMessageSystem(content=content, metadata=metadata)
    if role == "user":
        return imodel.ChatMessageUser(content=content, metadata=metadata)
    if role == "tool":
        return imodel.ChatMessageTool(content=content, tool_call_id=call_id)
    from inspect_ai.tool import ToolCall  # lazy: optional extra, large import

    tool_calls = [
        ToolCall(id=c.id or f"call-{k}", function=c.name, arguments=_arguments(c.arguments))
        for k, c in enumerate(calls)
    ]
    return imodel.ChatMessageAssistant(
        content=content, tool_calls=tool_calls or None, metadata=metadata
    )


def _arguments(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}
