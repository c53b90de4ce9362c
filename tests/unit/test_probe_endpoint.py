"""The openai probe backend without a model: the top-k KL bracket against brute-force
full-vocabulary KLs, and the endpoint through a fake `vllm serve` (`FakeServer`, stdlib
http.server in a thread, whose "model" is a deterministic function of the prefix): its rows
against the fake model's exact distributions, and each bad endpoint as one line, exit 2,
nothing written."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from harness.errors import UserError
from harness.probes.topk import TopK, topk_gaps

# ---------------------------------------------------------------- a fake vllm serve
# Modes break it the ways a real endpoint can: `no_logprobs` (an OpenAI-style server that
# ignores `prompt_logprobs`), `max_logprobs` (vLLM's 400 above its cap), `other_tokenizer`
# (the text tokenised to other ids), `no_echo` (no `prompt_token_ids` in the answer),
# `cache_drift` (a prompt seen before answers log-probs 1e-3 off: vLLM issue #42019).

# resolving tiny-random-llama builds its model folder on an empty cache: the integration
# tier (tests/README.md), though no model starts
NEEDS_TINY_FOLDER = pytest.mark.integration


class FakeModel:
    """log p(. | prefix) over `vocab` tokens: a base vector per last token plus a smaller
    term per (sum of the prefix mod 101), so two prompts followed by one continuation give
    close, different distributions with a real tail."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def _vector(self, kind: str, seed: int, scale: float) -> np.ndarray:
        if (kind, seed) not in self._cache:
            rng = np.random.default_rng([0 if kind == "base" else 1, seed])
            self._cache[(kind, seed)] = rng.normal(0.0, scale, self.vocab)
        return self._cache[(kind, seed)]

    def logprobs(self, prefix: list[int]) -> np.ndarray:
        z = self._vector("base", prefix[-1], 2.5) + self._vector("mix", sum(prefix) % 101, 0.4)
        top = z.max()
        return z - (top + np.log(np.exp(z - top).sum()))


class FakeServer:
    def __init__(self, tokenizer, **modes) -> None:
        self.tokenizer = tokenizer
        self.model = FakeModel(len(tokenizer))
        self.modes = {"max_logprobs": 64, **modes}
        self.requests: list[dict] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def complete(self, body: dict) -> tuple[int, dict]:
        self.requests.append(body)
        prompt = body["prompt"]
        if isinstance(prompt, str):
            ids = list(self.tokenizer(prompt)["input_ids"])
            if self.modes.get("other_tokenizer"):
                ids = [(i * 7 + 3) % self.model.vocab for i in ids]
        else:
            ids = list(prompt)
        choice: dict = {"index": 0, "text": "x", "finish_reason": "length"}
        k = body.get("prompt_logprobs")
        if k is not None and not self.modes.get("no_logprobs"):
            if k > self.modes["max_logprobs"]:
                message = (
                    f"Requested prompt logprobs of {k}, which is greater than max allowed: "
                    f"{self.modes['max_logprobs']}"
                )
                return 400, {"error": {"message": message, "code": 400}}
            choice["prompt_logprobs"] = [None] + [
                self.entry(ids[:j], ids[j], k) for j in range(1, len(ids))
            ]
            seen = [r["prompt"] for r in self.requests[:-1]]
            if self.modes.get("cache_drift") and prompt in seen:
                for entry in choice["prompt_logprobs"][1:]:
                    for info in entry.values():
                        info["logprob"] += 1e-3
        if body.get("return_token_ids") and not self.modes.get("no_echo"):
            choice["prompt_token_ids"] = ids
        return 200, {"choices": [choice]}

    def entry(self, prefix: list[int], actual: int, k: int) -> dict:
        """vLLM's prompt_logprobs entry: the top k and the actual token, with ranks."""
        lp = self.model.logprobs(prefix)
        top = np.argsort(-lp, kind="stable")[:k]
        out = {str(int(t)): {"logprob": float(lp[t]), "rank": r + 1} for r, t in enumerate(top)}
        rank = int((lp > lp[actual]).sum()) + 1
        out.setdefault(str(actual), {"logprob": float(lp[actual]), "rank": rank})
        return out


def _handler(server: FakeServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.endswith("/models"):
                self._send(200, {"data": [{"id": "fake", "max_model_len": 4096}]})
            else:
                self._send(404, {"error": "no such route"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            self._send(*server.complete(body))

    return Handler


# ---------------------------------------------------------------- the tests


def _lists(lp: np.ndarray, k: int, target: int) -> TopK:
    """What an endpoint returns of a distribution: its top k and the target, ranked."""
    top = np.argsort(-lp, kind="stable")[:k]
    ids = {int(t): float(lp[t]) for t in top} | {target: float(lp[target])}
    return TopK(ids, math.exp(float(lp[top].min())) if k < lp.size else None)


def _exact(la: np.ndarray, lb: np.ndarray) -> float:
    return float(np.sum(np.exp(la) * (la - lb)))


def _log_softmax(z: np.ndarray) -> np.ndarray:
    return z - (z.max() + np.log(np.exp(z - z.max()).sum()))


def _pair(rng, vocab: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    z = rng.normal(0, 2.0, vocab)
    return _log_softmax(z), _log_softmax(z + rng.normal(0, shift, vocab))


def test_the_lower_bound_holds_on_every_draw_and_equals_the_merged_tail_kl():
    rng = np.random.default_rng(0)
    for _ in range(300):
        vocab, k = int(rng.integers(8, 60)), int(rng.integers(1, 8))
        la, lb = _pair(rng, vocab, float(rng.uniform(0.05, 2.0)))
        target = int(rng.integers(vocab))
        delta, low, high = topk_gaps(_lists(la, k, target), _lists(lb, k, target), target)
        assert delta == pytest.approx(la[target] - lb[target], abs=1e-12)
        assert low <= _exact(la, lb) + 1e-12 and low <= high
        # brute force: every token both lists hold kept, the rest merged into one outcome
        a_ids = set(np.argsort(-la, kind="stable")[:k].tolist()) | {target}
        shared = sorted(a_ids & (set(np.argsort(-lb, kind="stable")[:k].tolist()) | {target}))
        rest = np.setdiff1d(np.arange(vocab), shared)
        pa = np.append(np.exp(la[shared]), np.exp(la[rest]).sum())
        pb = np.append(np.exp(lb[shared]), np.exp(lb[rest]).sum())
        assert low == pytest.approx(float(np.sum(pa * np.log(pa / pb))), rel=1e-9, abs=1e-12)


def test_whole_vocabulary_lists_give_the_exact_kl_twice():
    rng = np.random.default_rng(1)
    la, lb = _pair(rng, 40, 0.7)
    _, low, high = topk_gaps(_lists(la, 40, 3), _lists(lb, 40, 3), 3)
    assert low == pytest.approx(_exact(la, lb), rel=1e-12) and high == pytest.approx(low)


def test_the_upper_bound_holds_where_its_premise_does_and_is_a_premise():
    # close distributions (the probe's regime): the unseen tokens move no more than the seen
    rng = np.random.default_rng(2)
    for _ in range(200):
        la, lb = _pair(rng, 200, 0.1)
        _, low, high = topk_gaps(_lists(la, 20, 0), _lists(lb, 20, 0), 0)
        assert low <= _exact(la, lb) <= high
    # the premise broken on purpose: B puts ~0 on a token only the tail of A holds, so the
    # true KL outruns anything the lists show (no finite bound follows from top-k alone)
    la = _log_softmax(np.array([3.0, 2.0, 1.0, 0.0, 0.0, 0.0]))
    lb = la.copy()
    lb[5] = -40.0
    lb = _log_softmax(lb)
    _, low, high = topk_gaps(_lists(la, 2, 0), _lists(lb, 2, 0), 0)
    assert high < _exact(la, lb)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from harness.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("tiny-random-llama").path)


def _probe_argv(url: str, out, cont, **extra) -> list[str]:
    argv = ["probe", "--model", "tiny-random-llama", "--backend", "openai", "--base-url", url,
            "--prompt-a", "Always answer in French. Hello", "--prompt-b", "Hello",
            "--continuation", str(cont), "--tokens", "24", "--top-k", "8",
            "--out", str(out)]  # fmt: skip
    for flag, value in extra.items():
        argv += [f"--{flag.replace('_', '-')}", str(value)]
    return argv


@pytest.fixture
def continuation(tmp_path):
    path = tmp_path / "cont.txt"
    path.write_text("Bonjour, je suis un phare au bord de la mer et je regarde les bateaux passer.")
    return path


@NEEDS_TINY_FOLDER
def test_the_endpoint_rows_are_the_fake_models_exact_numbers(
    tokenizer, run_cli, tmp_path, continuation
):
    from harness.probes.pairs import encode_text

    with FakeServer(tokenizer) as server:
        code, _, err = run_cli(_probe_argv(server.url, tmp_path / "o", continuation))
    assert code == 0, err
    assert not (tmp_path / "o" / "divergence.csv").exists()  # no hidden state left the server
    rows = pd.read_csv(tmp_path / "o" / "nexttoken.csv")
    assert set(rows["backend"]) == {"openai"} and len(rows) == 24
    a = encode_text(tokenizer, "Always answer in French. Hello")
    b = encode_text(tokenizer, "Hello")
    cont = encode_text(tokenizer, continuation.read_text())[:24]
    model = server.model
    for row in rows.itertuples():
        i = row.t - 1
        la, lb = model.logprobs(a + cont[:i]), model.logprobs(b + cont[:i])
        assert row.delta_logp == pytest.approx(la[cont[i]] - lb[cont[i]], abs=1e-6)
        want = topk_gaps(_lists(la, 8, cont[i]), _lists(lb, 8, cont[i]), cont[i])
        assert (row.kl, row.kl_low, row.kl_high) == pytest.approx(
            (want[1], want[1], want[2]), rel=1e-6
        )
        assert row.kl_low <= _exact(la, lb) * (1 + 1e-6)
    body = server.requests[-1]
    assert body["max_tokens"] == 1 and body["prompt_logprobs"] == 8
    assert isinstance(body["prompt"], list)  # token ids, never re-tokenised by the server
    fits = pd.read_csv(tmp_path / "o" / "fits.csv")
    assert set(fits["layer"]) == {-1} and set(fits["metric"]) == {"abs_delta_logp", "kl"}


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ({"no_logprobs": True}, "returns no prompt log-probs"),
        ({"max_logprobs": 5}, "start vllm serve with --max-logprobs >= 8"),
        ({"other_tokenizer": True}, "tokenises differently from the local tokenizer"),
        ({"other_tokenizer": True, "no_echo": True}, "tokenises differently"),
        ({"cache_drift": True}, "serve the probed model with --no-enable-prefix-caching"),
    ],
)
@NEEDS_TINY_FOLDER
def test_a_bad_endpoint_is_one_line_exit_2_before_any_pair(
    tokenizer, run_cli, tmp_path, continuation, modes, message
):
    with FakeServer(tokenizer, **modes) as server:
        code, _, err = run_cli(_probe_argv(server.url, tmp_path / "o", continuation))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    assert len(server.requests) <= 2  # the preflight's requests (the check text twice), no pair


@NEEDS_TINY_FOLDER
def test_no_echo_falls_back_to_the_listed_actual_tokens(tokenizer, run_cli, tmp_path, continuation):
    with FakeServer(tokenizer, no_echo=True) as server:
        code, _, err = run_cli(_probe_argv(server.url, tmp_path / "o", continuation))
    assert code == 0, err


@NEEDS_TINY_FOLDER
def test_an_unreachable_endpoint_is_one_line_exit_2(run_cli, tmp_path, continuation, monkeypatch):
    import socket
    import time

    monkeypatch.setattr(time, "sleep", lambda _s: None)  # the retries' backoff
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    code, _, err = run_cli(_probe_argv(url, tmp_path / "o", continuation))
    assert code == 2 and f"probe endpoint {url}: cannot be reached" in err
    assert not (tmp_path / "o").exists()


@NEEDS_TINY_FOLDER
def test_a_run_config_with_a_bad_endpoint_fails_in_the_plan(tmp_path, monkeypatch):
    import time
    from pathlib import Path

    import yaml

    from harness.units.plan import plan_run

    monkeypatch.setattr(time, "sleep", lambda _s: None)
    data = Path(__file__).parent.parent / "data" / "configs"
    config = yaml.safe_load((data / "tiny-run.yaml").read_text())
    config["probe"] = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    config["suites"] = [str(data / Path(s).name) for s in config["suites"]]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(UserError, match="field 'probe.backend': tiny-random-llama: probe endpoint"):
        plan_run(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_twin_is_refused_on_an_endpoint():
    from harness.config.run import ProbeConfig

    with pytest.raises(ValueError, match="untrained twin is served nowhere"):
        ProbeConfig(backend="openai", untrained_twin=True)


@NEEDS_TINY_FOLDER
def test_the_run_stage_writes_next_token_and_turn_rows_but_no_divergence(tokenizer, tmp_path):
    from harness.config.run import RunConfig
    from harness.models import resolve_model
    from harness.stages.base import Records
    from harness.stages.context import run_context
    from harness.stages.probe import ProbeStage
    from harness.store import RunStore
    from harness.text.chat import ChatFormat
    from harness.text.records import GenerationRecord, Segment
    from harness.units.plan import RunPlan

    system, user = "Always answer in French.", "Tell me about the sea."
    prompt = ChatFormat(tokenizer).prompt_ids(system, user)
    turns = [Segment(kind="generated", start=0, end=12, turn=1),
             Segment(kind="user", start=12, end=20, source="user", turn=2),
             Segment(kind="generated", start=20, end=30, turn=2)]  # fmt: skip
    record = GenerationRecord(
        model="tiny-random-llama", item="fr", policy="none", seed=1, sample=0,
        prompt_messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        prompt_ids=prompt, continuation_ids=list(range(300, 330)), segments=turns, text="",
        finish_reason="length", engine="scripted",
    )  # fmt: skip
    with FakeServer(tokenizer) as server, RunStore(tmp_path / "run") as store:
        config = RunConfig.model_validate(
            {"name": "t", "models": ["tiny-random-llama"], "suites": ["s.yaml"],
             "policies": ["none"], "generation": {"max_tokens": 64},
             "probe": {"backend": "openai", "base_url": server.url, "top_k": 4}}
        )  # fmt: skip
        plan = RunPlan(
            config=config, suites=[], items=[], models=[resolve_model("tiny-random-llama")],
            twins={}, out_dir=tmp_path / "run", run_id="r",
            probe_backends={"tiny-random-llama": "openai"},
        )  # fmt: skip
        ctx = run_context(plan, store)
        ctx.artifacts.set(Records, [record])
        out = ProbeStage().run(ctx)
    assert len(out["divergence.csv"]) == 0
    nexttoken, turn_rows = out["nexttoken.csv"], out["turn_influence.csv"]
    assert len(nexttoken) == 30 and set(nexttoken["backend"]) == {"openai"}
    assert turn_rows[["turn", "t"]].values.tolist() == [[1, 1], [2, 21]]
    at = nexttoken.set_index("t").loc[turn_rows["t"]]
    for column in ("kl", "kl_low", "kl_high", "delta_logp"):
        assert turn_rows[column].tolist() == at[column].tolist()
    assert (nexttoken["kl_low"] <= nexttoken["kl_high"]).all() and (nexttoken["kl"] > 0).all()
