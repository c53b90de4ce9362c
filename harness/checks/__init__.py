"""Checks: what a task item's output must satisfy, one class per check type.

A check type is one `Check` subclass decorated with `@register`, in a module of this package or
of a package installed with a `harness.checks` entry point (`harness.registry`): its pydantic
fields are the suite's `checks:` entry, its methods score text (see `base`). Defining the class
is all it takes: `CheckSpec`, the type suites validate `checks:` against, looks the entry's
`type` up in the registry.
"""

from __future__ import annotations

from harness.checks.base import CHECK_TYPES, CUT_OFF_REASON, Check, CheckResult, Scope, register
from harness.registry import CHECKS, registered

__all__ = [
    "CHECK_TYPES",
    "CUT_OFF_REASON",
    "Check",
    "CheckResult",
    "CheckSpec",
    "Scope",
    "register",
]

# any registered check, told apart by its `type`
CheckSpec = registered(CHECKS, "type", Check)
