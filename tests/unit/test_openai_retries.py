"""The openai engine's HTTP retries (the openai SDK's own) against a mock server
(httpx.MockTransport, no network; sleeps are recorded, not slept): what waiting can fix is
retried, boundedly, as asked."""

from __future__ import annotations

import sys
import time
import types
from email.utils import format_datetime

import httpx
import pytest

from harness.engines.openai_engine import CompletionsApi, OpenAIEngine
from harness.errors import UserError


@pytest.fixture
def slept(monkeypatch):
    waits = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


def _server(*answers):
    """A transport that answers each request with the next of `answers` (a Response, or an
    exception to raise); records the requests."""
    seen = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), seen


def _api(transport, retries=4) -> CompletionsApi:
    return CompletionsApi(
        "http://server/v1", api_key="k", timeout_s=5, retries=retries, transport=transport
    )


def test_429_with_retry_after_waits_that_long_then_succeeds(slept):
    transport, seen = _server(
        httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200, json={"ok": 1})
    )
    response = _api(transport).request("GET", "/models")
    assert response.status_code == 200 and response.json() == {"ok": 1}
    assert len(seen) == 2 and slept == [7.0]
    assert seen[0].headers["Authorization"] == "Bearer k"


def test_server_errors_and_dropped_connections_back_off_with_jitter(slept):
    transport, seen = _server(
        httpx.Response(503),
        httpx.ConnectError("refused"),
        httpx.Response(502),
        httpx.Response(200),
    )
    assert _api(transport).request("POST", "/completions", json={}).status_code == 200
    assert len(seen) == 4 and len(slept) == 3
    # full jitter: attempt k waits a random time in [0, 0.5 * 2**(k-1)] seconds
    assert all(0 <= wait <= 0.5 * 2**k for k, wait in enumerate(slept))


def test_retries_are_bounded_and_the_last_status_is_reported(slept):
    transport, seen = _server(*[httpx.Response(500) for _ in range(3)])
    assert _api(transport, retries=2).request("GET", "/models").status_code == 500
    assert len(seen) == 3 and len(slept) == 2


def test_unreachable_server_is_one_user_error_after_the_retries(slept):
    transport, seen = _server(*[httpx.ConnectError("refused") for _ in range(3)])
    with pytest.raises(UserError, match=r"cannot reach http://server/v1 \(ConnectError\)"):
        _api(transport, retries=2).request("GET", "/models")
    assert len(seen) == 3


def test_a_400_fails_at_once_with_the_servers_reason(slept, monkeypatch):
    # no tokenizer is needed to fail: a stand-in spares the transformers import
    stand_in = types.SimpleNamespace(from_pretrained=lambda path: None)
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoTokenizer=stand_in))
    transport, seen = _server(
        httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 4096}]}),
        httpx.Response(400, json={"message": "prompt is longer than max_model_len"}),
    )
    engine = OpenAIEngine("unused", base_url="http://server/v1", transport=transport)
    from harness.engines import GenerationRequest, SamplingSettings

    request = GenerationRequest(prompt_ids=[1, 2], sampling=SamplingSettings(max_tokens=4))
    with pytest.raises(UserError, match=r"completion failed \(400\): .*longer than max_model_len"):
        engine.generate([request])
    assert len(seen) == 2 and slept == []  # one GET /models, one POST, no retry
    engine.close()


def test_retry_after_http_date_is_honoured(slept):
    from datetime import UTC, datetime, timedelta

    when = datetime.now(UTC) + timedelta(seconds=30)
    transport, seen = _server(
        httpx.Response(503, headers={"Retry-After": format_datetime(when, True)}),
        httpx.Response(200),
    )
    assert _api(transport).request("GET", "/models").status_code == 200
    assert len(seen) == 2 and 28 <= slept[0] <= 30


def test_a_retry_after_beyond_a_minute_is_not_waited(slept):
    # the SDK waits what Retry-After asks up to 60 s; a server asking for more is not retried,
    # and its 429 is reported (a day's wait inside a run helps no one)
    transport, seen = _server(
        httpx.Response(429, headers={"Retry-After": "86400"}), httpx.Response(200)
    )
    assert _api(transport).request("GET", "/models").status_code == 429
    assert len(seen) == 1 and slept == []
