"""The logged replies of turns.csv as the log report reads them (`harness.report.logs`): a
scored log's file a chunk at a time, each chunk whole conversations, tallied as they come
(`TurnTallies`), so the report's memory does not grow with the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pandas as pd

from harness.report.load import RunData
from harness.results import cells_are


def _decided(values: pd.Series) -> pd.Series:
    return values.notna() & (values.astype(str) != "")


CONVERSATION = ["model", "item", "sample", "conversation_id"]  # one logged conversation


def _marked(logged: pd.DataFrame) -> pd.DataFrame:
    return logged.assign(
        failed=cells_are(logged["passed"], False), decided=_decided(logged["passed"])
    )


def logged_chunks(data: RunData) -> Iterator[pd.DataFrame]:
    """turns.csv's logged replies (history `logged`), with `failed` and `decided`, a chunk at
    a time where the folder keeps it as a path (a scored log's), each chunk whole
    conversations: the rows of a chunk's last one wait for the next chunk (turns.csv is in
    key order, so a conversation's rows follow each other). Held in memory: one frame."""
    if "turns.csv" not in data.paths:
        turns = data.frame("turns.csv")
        if turns is not None and "history" in turns.columns:
            logged = turns[turns["history"] == "logged"]
            if not logged.empty:
                yield _marked(logged)
        return
    held = None
    for turns in data.chunks("turns.csv"):
        if "history" not in turns.columns:
            return
        logged = turns[turns["history"] == "logged"]
        if held is not None:
            logged = pd.concat([held, logged], ignore_index=True)
        if logged.empty:
            continue
        keys = logged[CONVERSATION]
        last = (keys == keys.iloc[-1]).all(axis=1)
        held = logged[last]
        if not last.all():
            yield _marked(logged[~last])
    if held is not None:
        yield _marked(held)


@dataclass
class TurnTallies:
    """What the log's sections show of its logged replies, tallied a chunk at a time."""

    firsts: pd.DataFrame  # the `worst` earliest failing conversations (`first_failures` order)
    failing: int = 0  # conversations with a failing turn
    conversations: int = 0
    by_turn: dict = field(default_factory=dict)  # (turn, check) -> [replies passed, decided]
    by_check: dict = field(default_factory=dict)  # check -> [decided, failed]
    undecided: dict = field(default_factory=dict)  # check -> replies it did not decide

    def add(self, turns: pd.DataFrame, worst: int) -> None:
        firsts = first_failures(turns)
        self.failing += len(firsts)
        self.conversations += len(turns.drop_duplicates(["item", "sample", "conversation_id"]))
        both = pd.concat([self.firsts, firsts], ignore_index=True) if len(self.firsts) else firsts
        self.firsts = _worst_first(both).head(worst)
        decided = turns[turns["decided"]]
        grid = decided.groupby(["turn", "check"])["failed"].agg(["sum", "size"])
        for (turn, check), (failed, size) in zip(grid.index, grid.to_numpy(), strict=True):
            tally = self.by_turn.setdefault((turn, check), [0, 0])
            tally[0] += int(size - failed)
            tally[1] += int(size)
        for check, (size, failed) in (
            decided.groupby("check")["failed"].agg(["size", "sum"]).iterrows()
        ):
            tally = self.by_check.setdefault(check, [0, 0])
            tally[0] += int(size)
            tally[1] += int(failed)
        for check, size in turns[~turns["decided"]].groupby("check").size().items():
            self.undecided[check] = self.undecided.get(check, 0) + int(size)


def tally_turns(chunks: Iterable[pd.DataFrame], worst: int) -> TurnTallies | None:
    """The chunks' tallies; None when there are no logged replies."""
    tallies = None
    for turns in chunks:
        if tallies is None:
            tallies = TurnTallies(firsts=first_failures(turns).head(0))
        tallies.add(turns, worst)
    return tallies


def first_failures(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per conversation with a failing turn: its first failing turn, that turn's first
    failing check and reason, its failing and scored turns; earliest first, then the larger
    share failed, then the id."""
    keys = ["model", "item", "sample", "conversation_id"]
    per_turn = turns.groupby([*keys, "turn"], sort=False)["failed"].any().reset_index()
    scored = per_turn.groupby(keys)["turn"].size().rename("scored")
    failing = per_turn[per_turn["failed"]].groupby(keys)["turn"].size().rename("failing")
    first = turns[turns["failed"]].sort_values([*keys, "turn"], kind="stable")
    first = first.drop_duplicates(keys).set_index(keys)[["turn", "check", "reason"]]
    first = first.join(failing).join(scored).reset_index()
    first["share"] = first["failing"] / first["scored"]
    return _worst_first(first)


def _worst_first(firsts: pd.DataFrame) -> pd.DataFrame:
    """Earliest failing turn first, then the larger share failed, then the id (stable)."""
    return firsts.sort_values(
        ["turn", "share", "conversation_id"], ascending=[True, False, True], kind="stable"
    ).reset_index(drop=True)
