"""Checks: what a task item's output must satisfy, one class per check type.

A check type is one `Check` subclass decorated with `@register` in a module of this package:
its pydantic fields are the suite's `checks:` entry, its methods score text (see `base`).
Every module here is imported below, so defining the class is all it takes: `CheckSpec`, the
type suites validate `checks:` against, is built from the registry.
"""

from __future__ import annotations

import functools
import importlib
import operator
import pkgutil
from typing import Annotated

from pydantic import Field

from harness.checks.base import CHECK_TYPES, CUT_OFF_REASON, Check, CheckResult, Scope, register

__all__ = [
    "CHECK_TYPES",
    "CUT_OFF_REASON",
    "Check",
    "CheckResult",
    "CheckSpec",
    "Scope",
    "register",
]


def _import_check_modules() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def _check_spec():
    """A union of the registered classes, told apart by `type` (sorted, for the error's list)."""
    classes = dict.fromkeys(CHECK_TYPES[name] for name in sorted(CHECK_TYPES))
    return Annotated[functools.reduce(operator.or_, classes), Field(discriminator="type")]


_import_check_modules()
CheckSpec = _check_spec()
