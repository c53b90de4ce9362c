"""Which suite item a logged conversation belongs to (docs/architecture.md, "Logged
conversations"): the item its `item` names; without one, the item whose `system` equals its
system message (leading and trailing whitespace aside), the first of them in suite order when
several items share it (counted, and said in the manifest); without either, `--item`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.run import TaskSuite
from harness.errors import UserError
from harness.scoring.score import item_index
from harness.text.chatlogs import LoggedConversation


class ItemMatcher:
    """Which suite item a logged conversation belongs to (see the module docstring)."""

    def __init__(self, suites: Sequence[TaskSuite], item: str | None = None) -> None:
        self.index = item_index(suites)
        if item is not None and item not in self.index:
            raise UserError(f"--item: no task item '{item}' in the suites")
        self.forced = item
        self.by_system: dict[str, list[str]] = {}
        for item_id, (_, entry) in self.index.items():
            self.by_system.setdefault(entry.system.strip(), []).append(item_id)
        self.seen_ids: dict[str, int] = {}
        self.shared: dict[tuple[str, ...], int] = {}

    def __call__(self, conversation: LoggedConversation) -> str:
        """The item id; UserError naming file:line when there is none."""
        return self.match(conversation)[0]

    def match(self, conversation: LoggedConversation) -> tuple[str, str]:
        """(item id, how: `item`, `system`, `--item` or `shared system`, the first of the
        items whose system it is, in suite order); UserError naming file:line for none."""
        where = conversation.where
        if conversation.item is not None:
            if conversation.item not in self.index:
                raise UserError(f"{where}: field 'item': no task item '{conversation.item}'")
            return conversation.item, "item"
        system = (conversation.system or "").strip()
        found = self.by_system.get(system, []) if system else []
        if self.forced is not None and (self.forced in found or not found):
            return self.forced, "--item"
        if len(found) > 1:
            return found[0], "shared system"
        if found:
            return found[0], "system"
        why = "its system message is no item's system" if system else "it has no system message"
        raise UserError(
            f"{where}: conversation matches no item (no 'item' on the line, {why}, no --item)"
        )

    def validate(self, conversation: LoggedConversation) -> None:
        """The check of `validate_chat_logs`: matched, and its id not used by an earlier line;
        conversations given the first of several items that share their system are counted
        for `shared_notes`."""
        item, how = self.match(conversation)
        if how == "shared system":
            found = tuple(self.by_system[(conversation.system or "").strip()])
            self.shared[found] = self.shared.get(found, 0) + 1
        earlier = self.seen_ids.setdefault(conversation.id, conversation.line)
        if earlier != conversation.line:
            raise UserError(
                f"{conversation.where}: id '{conversation.id}' is also the id of line {earlier}"
            )

    def shared_notes(self) -> list[str]:
        """One line per group of items sharing a system prompt that conversations matched by
        that prompt alone (what `harness init` writes: every item one system prompt)."""
        return [
            f"{count} conversation{'s' * (count != 1)} with the system prompt of items "
            f"{', '.join(items)} and no 'item': scored as '{items[0]}' (give lines an 'item', "
            "or pass --item, to choose)"
            for items, count in self.shared.items()
        ]
