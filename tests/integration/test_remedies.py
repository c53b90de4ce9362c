"""The remedies acting inside the model, checked against a direct computation on the tiny random
model: guidance's scores are uncond + gamma * (cond - uncond) of two separate forwards;
split-softmax's prompt mass is pi^k with rows summing to 1; SpotLight's share reaches its target
where it was below and nothing changes where it was not; the probe's share sees the steering."""

from __future__ import annotations

import pytest
import torch

from harness.capabilities import Capability
from harness.engines import SamplingSettings
from harness.engines.attention_bias import BiasSpec, _biased_attention, attention_modules, steered
from harness.engines.guidance import guided_scores, left_padded
from harness.errors import UserError
from harness.policies import ChatFormat, SampleSpec, policy_run, run_policy
from harness.policies.guidance import GuidancePolicy
from harness.policies.library import AttentionBiasPolicy, NonePolicy
from harness.policies.split_softmax import SplitSoftmaxPolicy
from harness.policies.spotlight import SpotlightPolicy
from harness.registry import ENGINES

pytestmark = pytest.mark.integration

P, S = 12, 40  # prompt keys and sequence length of the attention checks


@pytest.fixture(scope="module")
def tiny_hf_engine(tiny_model_path):
    from harness.engines import make_engine

    return make_engine("hf", tiny_model_path)


def _specs():
    return [
        SampleSpec(system="Always answer in French.", user="Tell me a story.", seed=3),
        SampleSpec(system="Be a pirate.", user="Describe your ship in detail, please.", seed=4),
    ]


def _probabilities(model, spec: BiasSpec | None):
    """(plain, steered) attention probabilities (H, S, S) of layer 0's module on random
    queries and keys: the steered ones read back through one-hot values (value j = e_j)."""
    module = attention_modules(model)[0]
    heads, d = model.config.num_attention_heads, model.config.head_dim
    kv_heads = model.config.num_key_value_heads
    g = torch.Generator().manual_seed(7)
    query = torch.randn(1, heads, S, d, generator=g) * 2
    key = torch.randn(1, kv_heads, S, d, generator=g) * 2
    value = torch.zeros(1, kv_heads, S, d)
    value[0, :, torch.arange(S), torch.arange(S)] = 1  # needs d >= S
    causal = torch.ones(S, S, dtype=torch.bool).tril().view(1, 1, S, S)
    positions = torch.arange(S).view(1, S)
    groups = heads // kv_heads
    logits = query @ key.repeat_interleave(groups, 1).transpose(-1, -2) * d**-0.5
    plain = logits.masked_fill(~causal, -torch.inf).softmax(-1)[0]  # (H, S, S)
    with steered(model, spec, layers=[0]):
        out, _ = _biased_attention(
            module, query, key, value, causal, scaling=d**-0.5, position_ids=positions
        )  # (1, S, H, d)
    return plain, out[0].transpose(0, 1)[..., :S]


def test_split_softmax_prompt_mass_is_pi_to_the_k(hf_tiny_model):
    model, _ = hf_tiny_model
    k = 0.4
    plain, steered_p = _probabilities(
        model, BiasSpec(0.0, torch.tensor([P]), "log", "split_softmax", k)
    )
    pi = plain[:, P:, 1:P].sum(-1)  # queries t >= 1; the set: prompt keys after the sink
    torch.testing.assert_close(steered_p.sum(-1), torch.ones(plain.shape[:2]), atol=1e-5, rtol=0)
    torch.testing.assert_close(steered_p[:, P:, 1:P].sum(-1), pi**k, atol=1e-5, rtol=0)
    # proportions inside each set are kept; queries inside the prompt are untouched
    inside = steered_p[:, P:, 1:P] / steered_p[:, P:, 1:P].sum(-1, keepdim=True)
    torch.testing.assert_close(inside, plain[:, P:, 1:P] / pi.unsqueeze(-1), atol=1e-5, rtol=0)
    torch.testing.assert_close(steered_p[:, :P], plain[:, :P], atol=1e-6, rtol=0)
    share = steered_p[:, P:, 1:P].sum(-1)
    assert (share >= pi - 1e-6).all() and (share > pi + 1e-3)[pi < 0.9].all()  # k < 1 raises


def test_spotlight_share_reaches_the_target_where_below(hf_tiny_model):
    model, _ = hf_tiny_model
    target = 0.3
    plain, steered_p = _probabilities(
        model, BiasSpec(0.0, torch.tensor([P]), "log", "spotlight", target)
    )
    pi = plain[:, P:, 1:P].sum(-1)
    below = pi < target
    assert below.any() and (~below).any()  # both cases occur in this draw
    share = steered_p[:, P:, 1:P].sum(-1)
    torch.testing.assert_close(
        share[below], torch.full_like(share[below], target), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(steered_p[:, P:][~below], plain[:, P:][~below], atol=1e-6, rtol=0)
    torch.testing.assert_close(steered_p.sum(-1), torch.ones(plain.shape[:2]), atol=1e-5, rtol=0)


def test_guided_scores_equal_uncond_plus_gamma_times_the_gap(hf_tiny_model, tiny_hf_engine):
    """One left-padded forward over cond and uncond rows gives the scores of two separate
    forwards; a greedy guided reply takes their argmax at every step."""
    model, _ = hf_tiny_model
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    gamma = 2.5
    specs = _specs()
    cond = [chat.prompt_ids(s.system, s.user) for s in specs]
    uncond = [chat.prompt_ids(None, s.user) for s in specs]
    ids, mask, positions = left_padded(cond + uncond, 0, "cpu")
    with torch.no_grad():
        batched = guided_scores(
            model(ids, attention_mask=mask, position_ids=positions).logits[:, -1], gamma
        )

        def direct(prompt):
            return torch.log_softmax(model(torch.tensor([prompt])).logits[0, -1], -1)

        for row in range(2):
            c, u = direct(cond[row]), direct(uncond[row])
            torch.testing.assert_close(batched[row], u + gamma * (c - u), atol=1e-4, rtol=0)
    greedy = SamplingSettings(temperature=0, max_tokens=6)
    records = run_policy(
        policy_run(GuidancePolicy(gamma=gamma)), tiny_hf_engine, chat, specs, greedy
    )
    assert records[0].policy == "guidance-2.5"
    with torch.no_grad():
        for row, record in enumerate(records):
            reply = record.continuation_ids
            assert len(reply) == 6
            for i, token in enumerate(reply):
                c, u = direct(cond[row] + reply[:i]), direct(uncond[row] + reply[:i])
                assert int((u + gamma * (c - u)).argmax()) == token


def test_strength_one_is_the_plain_model(tiny_hf_engine):
    """guidance gamma = 1 and split-softmax k = 1 change nothing; stronger settings do."""
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    greedy = SamplingSettings(temperature=0, max_tokens=12)

    def reply(spec):
        return [
            r.continuation_ids
            for r in run_policy(policy_run(spec), tiny_hf_engine, chat, _specs(), greedy)
        ]

    plain = reply(NonePolicy())
    assert reply(GuidancePolicy(gamma=1.0)) == plain
    assert reply(SplitSoftmaxPolicy(k=1.0)) == plain
    for strong in (
        GuidancePolicy(gamma=4.0),
        SplitSoftmaxPolicy(k=0.2),
        SpotlightPolicy(target=0.6),
        AttentionBiasPolicy(lam=3.0, schedule="constant"),
    ):
        assert reply(strong) != plain, strong.label


def test_sampled_guidance_is_reproducible_from_its_seed(tiny_hf_engine):
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    sampled = SamplingSettings(temperature=0.7, top_p=0.9, max_tokens=10, seed=1)
    runs = [
        [
            r.continuation_ids
            for r in run_policy(
                policy_run(GuidancePolicy()), tiny_hf_engine, chat, _specs(), sampled
            )
        ]
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


@pytest.mark.parametrize("spec", [GuidancePolicy(), SplitSoftmaxPolicy(), SpotlightPolicy()])
def test_only_hf_has_what_the_remedies_need(spec, tiny_hf_engine):
    """The planner refuses a policy whose needs the engine lacks: hf has them, vLLM and chat
    endpoints do not; a sample without a system prompt is refused before the first round."""
    from harness.config.run import GenerationConfig

    needs = set(spec.needs())
    assert needs & {Capability.ATTENTION_HOOKS, Capability.PAIRED_ROWS}
    gen = GenerationConfig(max_tokens=8)
    assert needs <= ENGINES["hf"].can(gen)
    for other in ("vllm", "chat"):
        assert not needs <= ENGINES[other].can(gen), other
    chat = ChatFormat(tiny_hf_engine.tokenizer)
    no_system = [SampleSpec(system=None, user="Hi.", seed=1)]
    with pytest.raises(UserError, match=f"policy {spec.label} needs a system prompt"):
        run_policy(
            policy_run(spec), tiny_hf_engine, chat, no_system, SamplingSettings(max_tokens=4)
        )


def test_probe_share_sees_spotlight(hf_tiny_model):
    """The probe's attention share (row A) under SpotLight: at least the target in every
    layer and position, where the plain model's falls below it."""
    from harness.probes.divergence import pair_divergence

    model, _ = hf_tiny_model
    g = torch.Generator().manual_seed(3)
    a, b = torch.randint(10, 5000, (20,), generator=g).tolist(), [5]
    cont = torch.randint(10, 5000, (60,), generator=g).tolist()
    plain = pair_divergence(model, a, b, cont, layers=[1, 2, 3, 4])
    spec = BiasSpec(0.0, torch.tensor([len(a), 0]), "log", "spotlight", 0.5)
    with steered(model, spec):
        lit = pair_divergence(model, a, b, cont, layers=[1, 2, 3, 4])
    assert plain.attention["share_prompt_mean"].min() < 0.5
    assert lit.attention["share_prompt_mean"].min() >= 0.5 - 1e-4
    assert (lit.rel_l2[-1, 20:] > plain.rel_l2[-1, 20:]).mean() > 0.5


def test_a_run_with_a_remedy_puts_its_quality_beside_its_gain(tmp_path):
    """A whole hf run (tiny model, probe off): quality.csv scores the remedy's replies under the
    unsteered model and policies.csv carries that quality beside each paired gain (pooled: the
    worst item's ratio), so the report's table and the prescription read it."""
    from pathlib import Path

    import harness
    from harness.results import PolicyRow, QualityRow

    config = {
        "name": "remedy-quality", "models": ["tiny-random-llama"], "suites": ["mini-suite.yaml"],
        "policies": ["none", {"name": "split_softmax", "k": 0.25}], "samples": 2,
        "generation": {"engine": "hf", "max_tokens": 24, "temperature": 0.8,
                       "continue_on_eos": True},
        "scoring": {"window": 8}, "probe": {"enabled": False},
    }  # fmt: skip
    base = Path(__file__).parents[1] / "data" / "configs"
    run = harness.run(harness.load_config(config, base=base), tmp_path / "out")
    quality = run.frame(QualityRow).set_index(["item", "policy"])
    remedy = quality.xs("split_softmax-0.25", level="policy")
    assert len(remedy) == 2 and (remedy["perplexity_ratio"] > 0).all()
    assert all(v in (True, False) for v in remedy["quality_holds"])
    policies = run.frame(PolicyRow)
    auc = policies[(policies["metric"] == "auc") & (policies["policy"] == "split_softmax-0.25")]
    by_item = auc.set_index("item")
    for item in remedy.index:
        assert by_item.loc[item, "perplexity_ratio"] == pytest.approx(
            remedy.loc[item, "perplexity_ratio"]
        )
    assert by_item.loc["all", "perplexity_ratio"] == pytest.approx(remedy["perplexity_ratio"].max())
