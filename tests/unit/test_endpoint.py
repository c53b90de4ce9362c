"""The endpoint settings, one model and one merge rule (harness.config.endpoint): a section's own
settings win, the rest come from the run's generation endpoint, and a section with its own
base URL is another server, whose served model the generation's name does not describe."""

from __future__ import annotations

import dataclasses

import pytest

from harness.config.endpoint import Endpoint, endpoint_of
from harness.config.run import RunConfig
from harness.engines.options import engine_options
from harness.probes.endpoint import endpoint_settings

GENERATION = {"engine": "openai", "base_url": "http://gen:8000/v1", "served_model": "big",
              "api_key_env": "GEN_KEY"}  # fmt: skip


def _config(probe: dict) -> RunConfig:
    return RunConfig.model_validate(
        {"name": "t", "models": ["tiny-random-llama"], "suites": ["s.yaml"],
         "policies": ["none"], "generation": GENERATION, "probe": {"backend": "openai", **probe}}
    )  # fmt: skip


def test_a_probe_without_settings_asks_the_generation_endpoint():
    settings = endpoint_settings(_config({}))
    assert settings == {"base_url": "http://gen:8000/v1", "served_model": "big",
                        "api_key_env": "GEN_KEY", "top_k": 20, "concurrency": 8}  # fmt: skip


def test_a_probe_on_another_server_does_not_borrow_the_generation_model_name():
    settings = endpoint_settings(_config({"base_url": "http://other:9000/v1"}))
    assert settings["base_url"] == "http://other:9000/v1"
    assert settings["served_model"] is None  # the other server's only model
    assert settings["api_key_env"] == "GEN_KEY"
    named = endpoint_settings(_config({"base_url": "http://other:9000/v1", "served_model": "s"}))
    assert named["served_model"] == "s"


def test_the_generation_engine_options_are_its_endpoint():
    options = engine_options(_config({}).generation)
    assert options == {"base_url": "http://gen:8000/v1", "served_model": "big",
                       "api_key_env": "GEN_KEY", "max_model_len": None}  # fmt: skip


def test_over_fills_only_what_is_unset():
    run = Endpoint(base_url="http://gen/v1", served_model="big", api_key_env="GEN_KEY")
    same = Endpoint(api_key_env="SIM_KEY").over(run)
    assert same == Endpoint(base_url="http://gen/v1", served_model="big", api_key_env="SIM_KEY")
    assert endpoint_of(object()).over(run) == run
    assert Endpoint().options()["api_key_env"] == "OPENAI_API_KEY"


def test_an_endpoint_asking_another_model_does_not_borrow_the_served_model():
    run = Endpoint(base_url="http://gen/v1", served_model="big", api_key_env="GEN_KEY")
    other = Endpoint().over(run, same_model=False)
    assert other == Endpoint(base_url="http://gen/v1", served_model=None, api_key_env="GEN_KEY")


def _simulator_options(tmp_path, monkeypatch, simulator: dict) -> dict:
    """The options the generate stage's simulator factory gives the openai engine."""
    import yaml

    import harness.stages.generate as generate
    from harness.config.files import load_run_config_and_suites
    from harness.engines import ENGINES
    from harness.units.plan import select_items
    from harness.units.selection import simulator_key

    sim = {"system": "Ask.", "turns": 1, "engine": "openai", **simulator}
    item = {"id": "talk", "system": "S.", "user": "U.", "turns": ["T."], "user_simulator": sim,
            "checks": [{"type": "regex_must", "pattern": "x"}]}  # fmt: skip
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({"suite": "s", "items": [item]}))
    config = {"name": "t", "models": ["tiny-random-llama"], "suites": ["suite.yaml"],
              "policies": ["none"], "generation": GENERATION,
              "probe": {"enabled": False}}  # fmt: skip
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    config, suites = load_run_config_and_suites(tmp_path / "run.yaml")
    items = select_items(config, suites)
    seen: list[dict] = []

    class Stop(Exception):
        pass

    def record(path, **options):
        seen.append(options)
        raise Stop  # the options are what this test reads; no engine is needed

    # no folder for the model: the options are what this test reads
    openai = dataclasses.replace(ENGINES["openai"], build=record, folder=lambda model: tmp_path)
    restore = ENGINES.swap({"openai": openai})
    try:
        with pytest.raises(Stop):
            factory = generate._simulator_factory(config, items)
            factory(simulator_key(items[0].item.user_simulator))
    finally:
        restore()
    return seen[0]


def test_a_simulated_user_with_its_own_model_does_not_borrow_the_served_model(
    tmp_path, monkeypatch
):
    own = _simulator_options(tmp_path, monkeypatch, {"model": "tiny-random-qwen2"})
    assert (own["base_url"], own["served_model"]) == ("http://gen:8000/v1", None)
    same = _simulator_options(tmp_path, monkeypatch, {})
    assert (same["base_url"], same["served_model"]) == ("http://gen:8000/v1", "big")
