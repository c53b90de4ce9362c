"""The settings of an OpenAI-compatible endpoint, defined once: where it is (`base_url`), which
of its models to ask (`served_model`), which environment variable holds its key
(`api_key_env`). The config sections that name an endpoint (generation, probe, a simulated
user) declare these fields with the types below, and every consumer reads them through
`Endpoint`: `endpoint_of(section)` takes a section's settings, `Endpoint.over` merges a
section over the run's generation endpoint (the one rule, docs/architecture.md, "Engines").
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.errors import UserError

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
# the chat engine's Anthropic Messages protocol (`generation.chat.protocol: anthropic`): the
# anthropic SDK's variables and its default URL (the SDK appends /v1/messages)
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
ANTHROPIC_URL_ENV = "ANTHROPIC_BASE_URL"
ANTHROPIC_URL = "https://api.anthropic.com"

# The fields as config sections declare them (their own defaults stay theirs: the run id
# hashes the config as written).
BaseUrl = str | None  # None: the endpoint it falls back to, else $OPENAI_BASE_URL
ServedModel = str | None  # None: the server's only model
KeyEnv = str  # the variable holding the API key (`api_key`: unset is an error unless default)


class Endpoint(BaseModel):
    """One endpoint's settings; None: not set here (the fallback's, then the defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str | None = None

    def over(self, fallback: Endpoint, same_model: bool = True) -> Endpoint:
        """These settings, each unset one taken from `fallback`, except the served model:
        an endpoint with its own base URL is another server, and one that asks another model
        (`same_model` False: a judge or simulated user naming a model of its own) another
        model, which the fallback's name does not describe (None there: the server's only
        model)."""
        borrow = self.base_url is None and same_model
        return Endpoint(
            base_url=self.base_url or fallback.base_url,
            served_model=self.served_model or (fallback.served_model if borrow else None),
            api_key_env=self.api_key_env or fallback.api_key_env,
        )

    def options(self) -> dict[str, str | None]:
        """The keyword options of the openai engine and the endpoint probe."""
        return {
            "base_url": self.base_url,
            "served_model": self.served_model,
            "api_key_env": self.api_key_env or DEFAULT_KEY_ENV,
        }


def server_url(base_url: str | None, protocol: str = "openai") -> str | None:
    """The URL to call: `base_url`, else $OPENAI_BASE_URL (protocol anthropic:
    $ANTHROPIC_BASE_URL, else Anthropic's API), without a trailing slash."""
    url: str | None
    if protocol == "anthropic":
        url = base_url or os.environ.get(ANTHROPIC_URL_ENV) or ANTHROPIC_URL
    else:
        url = base_url or os.environ.get(BASE_URL_ENV)
    return url.rstrip("/") if url else None


def api_key(api_key_env: str | None) -> str:
    """The key in `api_key_env` (default $OPENAI_API_KEY). A protocol's default variable that
    is unset or empty gives "EMPTY", the key a local server that needs none ignores; a variable
    the config names for its key that is unset is a mistake, named here rather than sent as
    "EMPTY" to a server that answers 401 without saying which variable was read."""
    name = api_key_env or DEFAULT_KEY_ENV
    value = os.environ.get(name)
    if value:
        return value
    if name in (DEFAULT_KEY_ENV, ANTHROPIC_KEY_ENV):
        return "EMPTY"
    raise UserError(
        f"api_key_env: the environment variable {name} is not set (export it with the "
        "endpoint's key, or leave api_key_env out for a server that needs no key)"
    )


def key_source(api_key_env: str | None) -> str:
    """Where a request's key came from, for an error message: the variable, and whether it is
    set (never the key)."""
    name = api_key_env or DEFAULT_KEY_ENV
    state = "set" if os.environ.get(name) else "unset: the key 'EMPTY' was sent"
    return f"key from ${name}, {state}"


def endpoint_of(section: Any) -> Endpoint:
    """The endpoint settings a config section (or request) declares; absent fields unset."""
    return Endpoint(
        base_url=getattr(section, "base_url", None),
        served_model=getattr(section, "served_model", None),
        api_key_env=getattr(section, "api_key_env", None),
    )


def parse_units(spec: str) -> tuple[str, str | None]:
    """`(kind, argument)` of a positions setting, or a UserError naming the accepted forms."""
    kind, _, arg = spec.partition(":")
    if kind in ("logprobs", "chars") and not arg:
        return kind, None
    if kind in ("tiktoken", "hf") and arg:
        return kind, arg
    raise UserError(
        f"positions: '{spec}' is not one of logprobs, chars, tiktoken:<encoding>, "
        "hf:<model or folder>"
    )
