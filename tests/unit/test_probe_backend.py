"""Which probe backend runs: `probe.backend` resolved per model by the plan before anything
runs (an impossible `vllm` is one line), recorded in manifest.json; no vLLM is started here
(`vllm_support` is replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UserError
from harness.models import ResolvedModel

DATA = Path(__file__).parent.parent / "data" / "configs"


@pytest.fixture
def support(monkeypatch):
    """model path -> why vLLM cannot probe it ("" = it can)."""
    import harness.probes.vllm_backend as backend

    answers: dict[str, str] = {}
    monkeypatch.setattr(backend, "vllm_support", lambda path: answers.get(str(path), ""))
    return answers


def _models(*names: str) -> list:
    return [
        ResolvedModel(name=name, source="local", path=Path(f"/models/{name}"), content_key=name)
        for name in names
    ]


def test_hf_is_hf_without_asking_vllm(monkeypatch):
    import harness.probes.vllm_backend as backend
    from harness.units.plan_checks import probe_backends

    monkeypatch.setattr(backend, "vllm_support", lambda path: pytest.fail("vLLM was asked"))
    assert probe_backends("hf", _models("a", "b")) == {"a": "hf", "b": "hf"}


def test_auto_takes_vllm_where_it_can_probe_else_hf(support):
    from harness.units.plan_checks import probe_backends

    support["/models/gemma"] = "vLLM's Gemma cannot hand out intermediate hidden states"
    assert probe_backends("auto", _models("llama", "gemma")) == {"llama": "vllm", "gemma": "hf"}


def test_explicit_vllm_that_cannot_probe_is_one_line(support):
    from harness.units.plan_checks import probe_backends

    support["/models/gemma"] = "vLLM is not installed"
    with pytest.raises(UserError, match="field 'probe.backend': vllm cannot probe gemma: vLLM is"):
        probe_backends("vllm", _models("gemma"))


def test_the_plan_resolves_the_backend_of_models_and_twins(support, tmp_path, monkeypatch):
    """On an empty cache: the plan reads each model's config without building its folder."""
    import yaml

    from harness.units.plan import plan_run

    config = yaml.safe_load((DATA / "tiny-run.yaml").read_text())
    config["probe"] = {**config.get("probe", {}), "enabled": True, "backend": "auto",
                       "untrained_twin": True}  # fmt: skip
    config["suites"] = [str(DATA / Path(s).name) for s in config["suites"]]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    plan = plan_run(path, tmp_path / "out")
    names = [m.name for m in plan.models] + [t.name for t in plan.twins.values()]
    assert plan.probe_backends == dict.fromkeys(names, "vllm") and len(names) == 2
    assert not (tmp_path / "cache" / "models").exists()


def test_manifest_records_the_backend_that_ran(tmp_path):
    from harness.config.run import RunConfig
    from harness.stages.context import StageContext
    from harness.stages.report import ManifestStage
    from harness.units.plan import RunPlan

    config = RunConfig.model_validate(
        {"name": "t", "models": ["m"], "suites": ["s.yaml"], "policies": ["none"],
         "probe": {"backend": "auto"}, "generation": {"max_tokens": 64}}
    )  # fmt: skip
    plan = RunPlan(
        config=config, suites=[], items=[], models=[], twins={}, out_dir=tmp_path, run_id="r",
        probe_backends={"m": "vllm"},
    )  # fmt: skip
    ctx = StageContext(plan, None, tmp_path)
    manifest = ManifestStage().run(ctx)["manifest.json"]
    assert manifest["probe_backends"] == {"m": "vllm"}
    assert manifest["config"]["probe"]["backend"] == "auto"  # what was asked, next to what ran


def test_unknown_backend_on_the_command_line_is_one_line_exit_2(run_cli, tmp_path):
    code, _, err = run_cli(["probe", "--model", "tiny-random-llama", "--prompt-a", "A",
                            "--prompt-b", "B", "--continuation", "generate", "--tokens", "32",
                            "--backend", "onnx", "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 2 and "--backend must be 'vllm', 'hf', 'openai' or 'auto', got 'onnx'" in err
    assert not (tmp_path / "o").exists()
