"""docs/config.md, the reference of every YAML field, rendered from the pydantic models.

`python -m harness.config.docs --write` writes it; a unit test fails while the file differs from
this rendering. Two roots: a run config (`RunConfig`) and a task suite (`TaskSuite`); every
model reachable from their fields' types gets one section (policy specs, gates, checks...).
A field's description is its `Field(description=...)` where given, else the comments written
with it in the source (the lines right above it and the one at its end), which is where this
repository documents its fields; a model's text is its docstring.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import sys
import textwrap
import tokenize
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from harness.config.run import RunConfig, TaskSuite
from harness.registry import Registered, RegisteredName

ROOTS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("run config", RunConfig),
    ("task suite", TaskSuite),
)
DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"
COMMAND = "python -m harness.config.docs --write"


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> its source comments, for the fields declared in `model` and its bases."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            found.update(_class_comments(cls))
    return found


def _class_comments(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # a class built at run time has no source
        return {}
    lines = source.splitlines()
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    node = ast.parse(source).body[0]
    out = {}
    for stmt in getattr(node, "body", []):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above = []
        row = stmt.lineno - 1  # 1-based line numbers: the line above the field
        while row in comments and lines[row - 1].lstrip().startswith("#"):
            above.insert(0, comments[row])
            row -= 1
        end = comments.get(stmt.end_lineno or stmt.lineno)
        text = " ".join([*above, *([end] if end and end not in above else [])])
        if text and not text.startswith("fmt:"):
            out[stmt.target.id] = text.replace("# fmt: skip", "").strip()
    return out


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _strip(annotation: Any) -> Any:
    """The type without its `Annotated` metadata; a field that takes what a registry holds
    (`harness.registry`) as the union of the registered models, or of the registered names."""
    while get_origin(annotation) is typing.Annotated:
        for mark in annotation.__metadata__:
            if isinstance(mark, Registered):
                return Union[tuple(mark.classes())]  # noqa: UP007 (a union built at run time)
            if isinstance(mark, RegisteredName):
                return Literal[tuple(sorted(mark.registry))]
        annotation = get_args(annotation)[0]
    return annotation


def _field_type(info: FieldInfo) -> Any:
    """The field's type, with the registry mark pydantic moved into its metadata."""
    marks = [m for m in info.metadata if isinstance(m, Registered | RegisteredName)]
    return typing.Annotated[info.annotation, *marks] if marks else info.annotation


def type_text(annotation: Any) -> str:
    """A field's type as a reader of YAML needs it; models link to their section."""
    annotation = _strip(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(f"`{a!r}`".replace("'", '"') for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        inner = ", ".join(type_text(a) for a in args if a is not Ellipsis)
        return f"list of {inner}" if inner else "list"
    if origin is dict:
        return f"map of {type_text(args[0])} to {type_text(args[1])}" if args else "map"
    if annotation is type(None):
        return "null"
    if _is_model(annotation):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " | ".join(f'`"{m.value}"`' for m in annotation)
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def constraints(info: FieldInfo) -> str:
    """The field's bounds (gt, ge, min_length, pattern...) from its metadata."""
    parts = []
    for meta in info.metadata:
        for name in ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern"):
            value = getattr(meta, name, None)
            if value is not None:
                parts.append(f"{name} {value}")
    return ", ".join(dict.fromkeys(parts))


def default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(the section's defaults)"
    if isinstance(value, Enum):
        value = value.value
    return f"`{json.dumps(value, default=str, ensure_ascii=False)}`"  # as YAML reads it


def nested_models(annotation: Any) -> list[type[BaseModel]]:
    """Every model named in a type, in order of appearance."""
    annotation = _strip(annotation)
    if _is_model(annotation):
        return [annotation]
    return [m for arg in get_args(annotation) for m in nested_models(arg)]


def _model_summary(annotation: Any) -> str:
    """A section field's description where the field has none: its model's first sentence."""
    models = nested_models(annotation)
    doc = inspect.getdoc(models[0]) if len(models) == 1 and models[0].__doc__ else None
    return " ".join(doc.split()).split(". ")[0].rstrip(".") + "." if doc else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def model_section(model: type[BaseModel], where: str) -> list[str]:
    doc = inspect.getdoc(model) if model.__doc__ else ""
    comments = field_comments(model)
    lines = [f"## {model.__name__}", "", f"Where: {where}.", ""]
    if doc and doc != inspect.getdoc(BaseModel):
        lines += [" ".join(doc.split()), ""]
    lines += ["| Field | Type | Default | Bounds | Description |", "|---|---|---|---|---|"]
    for name, info in model.model_fields.items():
        text = info.description or comments.get(name) or _model_summary(info.annotation)
        cells = [f"`{info.alias or name}`", type_text(_field_type(info)), default_text(info),
                 constraints(info), text]  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, ""]


def render() -> str:
    """docs/config.md: one section per model, breadth-first from the roots."""
    parts = [
        "# Config reference",
        "",
        f"Generated from the pydantic models by `{COMMAND}`; do not edit. Every field of a run",
        "config (`harness run CONFIG`) and of a task suite (the files a config's `suites:`",
        "names), with its type, default, bounds and what it does. An unknown key is an error.",
        "",
    ]
    seen: dict[type[BaseModel], str] = {}
    queue: list[tuple[type[BaseModel], str]] = [(model, label) for label, model in ROOTS]
    while queue:
        model, where = queue.pop(0)
        if model in seen:
            continue
        seen[model] = where
        parts += model_section(model, where)
        for name, info in model.model_fields.items():
            path = f"{where} → `{info.alias or name}`"
            queue += [(m, path) for m in nested_models(info.annotation) if m not in seen]
    return "\n".join(parts)


def write_doc(path: Path = DOC) -> None:
    path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_doc()
    else:
        print(render(), end="")
