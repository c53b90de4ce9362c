"""The one way to extend the harness: a `Registry` per extension point (check types, policies,
engines), filled by decorators and found by discovery.

Discovery, on the first look-up: every module of the extension point's own package is imported
(so defining and decorating a class in a new module of that package is all it takes), then
every Python entry point of its group (`harness.checks`, `harness.policies`,
`harness.engines`), so a check, policy or engine of a package installed beside the harness is
found too. An entry point names a module (its decorators register on import) or an object (it
registers under the entry point's name). Docs: docs/architecture.md, "Extending the harness".
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, SerializeAsAny, ValidationError, WrapValidator

from harness.errors import UserError

T = TypeVar("T")
Obj = TypeVar("Obj")


class Registry(Mapping[str, T], Generic[T]):
    """Name -> registered object of one extension point; reading it discovers first."""

    def __init__(self, kind: str, package: str, group: str) -> None:
        self.kind, self.package, self.group = kind, package, group
        self._entries: dict[str, T] = {}
        self._discovered = False

    def add(self, name: str, obj: T) -> None:
        """Register `obj` as `name`; a name taken by another object is an error."""
        known = self._entries.get(name)
        if known is not None and known is not obj and known != obj:
            raise TypeError(f"{self.kind} {name!r} is registered twice ({known!r}, {obj!r})")
        self._entries[name] = obj

    def peek(self, name: str) -> T | None:
        """What is registered as `name` so far, without discovering."""
        return self._entries.get(name)

    def register(self, name: str) -> Callable[[Obj], Obj]:
        """Decorator: `@REGISTRY.register("name")` adds what it decorates under `name`."""

        def decorate(obj: Obj) -> Obj:
            self.add(name, obj)  # type: ignore[arg-type]
            return obj

        return decorate

    def discover(self) -> None:
        """Import the package's modules and load the group's entry points, once."""
        if self._discovered:
            return
        self._discovered = True  # first: the modules imported below read the registry too
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{self.package}.{module.name}")
        for point in entry_points(group=self.group):
            try:
                loaded = point.load()
            except Exception as exc:  # a broken plugin: one line naming it
                raise UserError(
                    f"{self.kind} plugin '{point.name}' ({point.value}, entry point group "
                    f"{self.group}) failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(loaded, ModuleType) and point.name not in self._entries:
                self.add(point.name, loaded)

    def lookup(self, name: str) -> T:
        """The object registered as `name`; an unknown name is a UserError that lists the
        known ones and the nearest."""
        found = self.get(name)
        if found is None:
            raise UserError(self.unknown(name))
        return found

    def unknown(self, name: str) -> str:
        """The line that refuses `name`: what is known, and the nearest known name."""
        names = sorted(self)
        line = f"unknown {self.kind}: {name!r} (expected one of {', '.join(map(repr, names))})"
        near = difflib.get_close_matches(name, names, n=1)
        return line + (f"; did you mean {near[0]!r}?" if near else "")

    def __getitem__(self, name: str) -> T:
        self.discover()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)

    def swap(self, entries: Mapping[str, T]) -> Callable[[], None]:
        """From now on `entries` stand in for the registered objects of their names (tests run
        the whole harness on a stand-in engine this way). Returns what puts them back."""
        self.discover()
        saved = dict(self._entries)
        self._entries.update(entries)

        def restore() -> None:
            self._entries.clear()
            self._entries.update(saved)

        return restore


@dataclass(frozen=True)
class Registered:
    """The mark of a config field whose models are the ones `registry` holds, told apart by
    their `tag` field (`harness.config.docs` lists them from it)."""

    registry: Registry[Any]
    tag: str

    def classes(self) -> list[type]:
        """The registered models, each once, in order of their names."""
        registry = self.registry
        return list(dict.fromkeys(self.model_of(registry[name]) for name in sorted(registry)))

    @staticmethod
    def model_of(obj: Any) -> type:
        return getattr(obj, "spec", obj)  # a policy registers (spec, run); a check its class

    def validate(self, data: Any, handler: Callable[[Any], Any]) -> Any:
        if isinstance(data, tuple(self.classes())):
            return data
        if not isinstance(data, dict):
            return handler(data)  # the base model's own error for a non-mapping
        if self.tag not in data:
            raise ValueError(f"missing '{self.tag}'")
        found = self.registry.get(data[self.tag]) if isinstance(data[self.tag], str) else None
        if found is None:
            raise ValueError(self.registry.unknown(str(data[self.tag])))
        try:
            return self.model_of(found).model_validate(data)
        except ValidationError as exc:  # located under the tag, as a tagged union locates it
            errors = [{**e, "loc": (data[self.tag], *e["loc"])} for e in exc.errors()]
            raise ValidationError.from_exception_data(exc.title, errors) from None  # type: ignore[arg-type]


def registered(registry: Registry[Any], tag: str, base: type) -> Any:
    """The type of a config field that takes any model `registry` holds (subclasses of `base`),
    the one whose `tag` field names it: looked up when a config is validated, so a model
    registered by a plugin validates like a built-in one, and dumped whole."""
    mark = Registered(registry, tag)
    return Annotated[SerializeAsAny[base], WrapValidator(mark.validate), mark]  # type: ignore[valid-type]


@dataclass(frozen=True)
class RegisteredName:
    """The mark of a config field that names one of the objects `registry` holds."""

    registry: Registry[Any]

    def validate(self, name: str) -> str:
        if name not in self.registry:
            raise ValueError(self.registry.unknown(name))
        return name


def registered_name(registry: Registry[Any]) -> Any:
    """The type of a config field that names a registered object (an engine kind)."""
    mark = RegisteredName(registry)
    return Annotated[str, AfterValidator(mark.validate), mark]


# The extension points. Each is filled by its own package's decorators: check types by
# `harness.checks.register`, policies by `harness.policies.register_policy`, engines by
# `harness.engines.kinds.register_engine`.
CHECKS: Registry[Any] = Registry("check type", "harness.checks", "harness.checks")
POLICIES: Registry[Any] = Registry("policy", "harness.policies", "harness.policies")
ENGINES: Registry[Any] = Registry("engine", "harness.engines", "harness.engines")
