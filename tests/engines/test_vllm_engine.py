"""The vLLM engine against the real vLLM (its CPU build here; `nox -s vllm` installs it): generation, episodes, the processed
logprobs against a transformers forward pass of the same tokens, per-prompt seeds, reproducibility, the context
limit, the dtype, progress and LoRA serving, on the embedded model.

Starting an engine takes 30-100 s on two cores: the module starts two, the base model and a LoRA adapter on it, and
every test shares them. Skipped where vLLM is not importable (the `tests` session).
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")]

torch = pytest.importorskip("torch")

CONVS = [[{"role": "user", "content": "What is 17 + 25? Answer with a number."}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime number above 50."}],
         [{"role": "user", "content": "Write one word."}]]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The embedded model, converted once into the session's private cache (the one conftest points tests at)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GENENV_CACHE", str(tmp_path_factory.getbasetemp() / "genenv-cache"))
        from genenv_cli.machinery.models import ensure_embedded

        yield ensure_embedded()


@pytest.fixture(scope="module")
def base(cache):
    from genenv_cli.machinery.engines import open_engine
    from genenv_cli.machinery.models import ModelRef

    engine = open_engine(ModelRef("embedded", str(cache)), engine="vllm", seed=5)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def hf_model(cache):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(cache, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def adapter(cache, tmp_path_factory, hf_model):
    """A LoRA adapter (rank 8, random B so that it changes the model) saved as PEFT writes it, tokenizer beside it
    as genenv's checkpoints have it."""
    import copy

    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("lora")
    torch.manual_seed(0)
    peft_model = get_peft_model(copy.deepcopy(hf_model), LoraConfig(
        r=8, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(cache).save_pretrained(folder)
    return folder, peft_model.eval()


@pytest.fixture(scope="module")
def lora_engine(cache, adapter, base):
    from genenv_cli.catalogue.settings import VLLMConfig
    from genenv_cli.machinery.engines import open_engine
    from genenv_cli.machinery.models import ModelRef

    base.close()  # one engine at a time: the base engine's tests ran first (file order)
    engine = open_engine(ModelRef("lora", str(cache), str(adapter[0])), engine="vllm", seed=5,
                         vllm_settings=VLLMConfig(max_lora_rank=8))
    yield engine
    engine.close()


def _forward_logprobs(model, g, temperature: float):
    ids = torch.tensor([g.prompt_token_ids + g.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(g.prompt_token_ids) - 1:-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(g.token_ids)[:, None]).squeeze(1)


def _tokens(out):
    return [[g.token_ids for g in gens] for gens in out]


def test_the_engine_serves_in_the_cpu_dtype_with_the_models_context_limit(base, cache):
    import json

    from genenv_cli.machinery.engines import vllm_device

    assert vllm_device() == "cpu"
    config = base.llm.llm_engine.model_config
    assert config.dtype == torch.float32  # auto on CPU: the trainer's dtype, not vLLM's float16
    assert config.enforce_eager  # vllm.compile = auto: no torch.compile on CPU
    assert base.context_limit() == json.loads((cache / "config.json").read_text())["max_position_embeddings"]


def test_generation_and_progress(base):
    from genenv_cli.machinery.engines import SamplingParams

    seen: list[tuple[int, int]] = []
    out = base.generate(CONVS, SamplingParams(temperature=1.0, max_new_tokens=12, n=3, seed=1),
                        on_progress=lambda s, t: seen.append((s, t)))
    assert [len(gens) for gens in out] == [3, 3, 3]
    for conv, gens in zip(CONVS, out, strict=True):
        for g in gens:
            assert g.prompt_token_ids == base.prompt_ids(conv)
            assert 1 <= len(g.token_ids) == len(g.logprobs) <= 12
            assert g.finish_reason == ("length" if len(g.token_ids) == 12 else "stop")
            assert g.text == base.tokenizer.decode(g.token_ids, skip_special_tokens=True)
    # every finished sequence counted once (vLLM's rendering bar is not forwarded): the display ends at 100%
    assert sum(s for s, _ in seen) == 9
    assert sum(t for _, t in seen) == sum(len(g.token_ids) for gens in out for g in gens)


@pytest.mark.parametrize("temperature,top_p", [(0.7, 1.0), (1.0, 0.9)])
def test_processed_logprobs_match_a_forward_pass(base, hf_model, temperature, top_p):
    from genenv_cli.machinery.engines import SamplingParams

    out = base.generate(CONVS, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=16, n=2, seed=2))
    diffs, untempered = [], []
    for gens in out:
        for g in gens:
            ref = _forward_logprobs(hf_model, g, temperature)
            got = torch.tensor(g.logprobs)
            if top_p == 1.0:
                diffs.append((ref - got).abs())
            else:
                # top-p renormalises over the kept tokens: each kept token's logprob can only rise
                diffs.append((ref - got).clamp(min=0))
            if temperature != 1.0:
                untempered.append((_forward_logprobs(hf_model, g, 1.0) - got).abs())
    gap = torch.cat(diffs)
    assert gap.max() < 0.02 and gap.mean() < 2e-3, (gap.max(), gap.mean())  # fp32 against fp32: numerics only
    if untempered:  # the logprob is of the tempered distribution (processed), not the model's raw one
        assert torch.cat(untempered).mean() > 20 * gap.mean()


def test_every_prompt_gets_its_own_seed_and_runs_reproduce(base):
    from genenv_cli.machinery.engines import SamplingParams

    p = SamplingParams(temperature=1.0, max_new_tokens=10, n=2, seed=7)
    twice = [CONVS[0], CONVS[0]]
    a = base.generate(twice, p)
    assert a[0][0].token_ids != a[0][1].token_ids  # the children of one prompt differ
    assert _tokens(a)[0] != _tokens(a)[1]          # and so do two copies of one prompt
    assert _tokens(base.generate(twice, p)) == _tokens(a)  # the same call, the same tokens
    # reproducible whatever the batch: prompt 0 alone draws what it drew beside others
    assert _tokens(base.generate(CONVS[:1], p))[0] == _tokens(a)[0]
    assert _tokens(base.generate(twice, SamplingParams(temperature=1.0, max_new_tokens=10, n=2, seed=8))) != _tokens(a)


def test_shards_draw_what_one_call_draws(base):
    """rollout's seeds come from each task's place in the epoch (seed + j*K): the tasks split round-robin into 3
    shards, each generated in its own call with its own tasks' seeds, draw exactly what one call over all of them
    draws, as `genenv rollout` one process against `--shard I/3`."""
    from genenv_cli.machinery.engines import SamplingParams

    convs = CONVS + [[{"role": "user", "content": f"Compute {i} + {i + 3}."}] for i in range(4)]
    p = SamplingParams(temperature=1.0, max_new_tokens=8, n=3, seed=11)
    seeds = [p.seed + j * p.n for j in range(len(convs))]
    whole = _tokens(base.generate(convs, p, seeds=seeds))
    for i in range(3):
        part = base.generate(convs[i::3], p, seeds=seeds[i::3])
        assert _tokens(part) == whole[i::3]


def test_greedy_scores_the_argmax(base, hf_model):
    from genenv_cli.machinery.engines import SamplingParams

    g = base.generate(CONVS[:1], SamplingParams(temperature=0.0, max_new_tokens=8))[0][0]
    ids = torch.tensor([g.prompt_token_ids + g.token_ids])
    with torch.no_grad():
        logits = hf_model(ids).logits[0, len(g.prompt_token_ids) - 1:-1]
    assert logits.argmax(-1).tolist() == g.token_ids


def test_episodes_play_as_on_the_hf_engine(base, cache, hf_model):
    """The calc domain's episodes, greedy, on vLLM (prompts sent as the episode's token ids) and on transformers: the
    same turns and tokens, and the agent's tokens are the argmax of a forward pass over the whole episode."""
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import ModelRef
    from genenv_cli.stages.rollout_episodes import play_tasks

    calc = get_domain("calc")
    tasks = [{"domain": "calc", "payload": s.payload} for s in calc.seeds("validation")[:8]]
    params = SamplingParams(temperature=0.0, max_new_tokens=24, n=1, seed=0)
    on_vllm = [r for (r,) in play_tasks(base, {"calc": calc}, tasks, params, [0] * len(tasks))]
    hf = HFEngine(ModelRef("embedded", str(cache)), model=hf_model, tokenizer=base.tokenizer, batch_size=8)
    on_hf = [r for (r,) in play_tasks(hf, {"calc": calc}, tasks, params, [0] * len(tasks))]
    assert [r["completion_token_ids"] for r in on_vllm] == [r["completion_token_ids"] for r in on_hf]
    assert [r["agent_mask"] for r in on_vllm] == [r["agent_mask"] for r in on_hf]
    assert any(r["turns"] > 1 for r in on_vllm)   # the embedded model calls the calculator
    for r in on_vllm:
        ids = torch.tensor([r["prompt_token_ids"] + r["completion_token_ids"]])
        with torch.no_grad():
            logits = hf_model(ids).logits[0, len(r["prompt_token_ids"]) - 1:-1]
        agent = torch.tensor(r["agent_mask"], dtype=torch.bool)
        assert logits.argmax(-1)[agent].tolist() == torch.tensor(r["completion_token_ids"])[agent].tolist()


def test_prompts_sent_as_sessions_draw_what_a_fresh_read_draws(base):
    """Prompts sent as an episode's sessions: every greedy answer is what the same prompt
    read afresh (the cache emptied first) gives. vLLM's CPU build 0.32 reports no cached tokens
    (`RequestOutput.num_cached_tokens` is 0 on a repeated prompt), so the hit rate is not asserted here."""
    from genenv_cli.machinery.engines import SamplingParams

    greedy = SamplingParams(temperature=0.0, max_new_tokens=24, n=1, seed=0)
    prompts = [base.prompt_ids(m) for m in CONVS]
    base.llm.reset_prefix_cache()
    fresh = base.generate_ids(prompts, greedy)
    again = base.generate_ids(prompts, greedy, sessions=[0, 1, 2])
    assert [g[0].token_ids for g in again] == [g[0].token_ids for g in fresh]


def test_a_prompt_beyond_the_context_limit_is_refused(base):
    from genenv_cli.core.errors import ModelError
    from genenv_cli.machinery.engines import SamplingParams

    too_long = [{"role": "user", "content": "seven " * (base.context_limit() + 10)}]
    with pytest.raises(ModelError, match=rf"prompt 2 of 2 is \d+ tokens long, at or above the engine's context limit "
                                         rf"of {base.context_limit()} tokens"):
        base.generate([CONVS[0], too_long], SamplingParams(max_new_tokens=4))
    # what vLLM itself does with it: the engine's check stands in front of a refusal, not of a crash
    import vllm

    with pytest.raises(Exception, match=f"maximum context length is {base.context_limit()} tokens"):
        base.llm.generate([{"prompt_token_ids": base.prompt_ids(too_long)}], vllm.SamplingParams(max_tokens=4),
                          use_tqdm=False)


def test_a_lora_adapter_is_served(lora_engine, adapter, hf_model):
    from genenv_cli.machinery.engines import SamplingParams

    peft_model = adapter[1]
    out = lora_engine.generate(CONVS[:2], SamplingParams(temperature=1.0, max_new_tokens=12, n=2, seed=3))
    with_adapter, without = [], []
    for gens in out:
        for g in gens:
            got = torch.tensor(g.logprobs)
            with_adapter.append((_forward_logprobs(peft_model, g, 1.0) - got).abs())
            with peft_model.disable_adapter():
                without.append((_forward_logprobs(peft_model, g, 1.0) - got).abs())
    near, far = torch.cat(with_adapter), torch.cat(without)
    assert near.max() < 0.02, near.max()     # the tokens come from base + adapter ...
    assert far.mean() > 10 * near.mean()     # ... not from the base model alone


def test_an_adapter_above_max_lora_rank_is_refused_before_the_engine_starts(cache, adapter):
    from genenv_cli.catalogue.settings import VLLMConfig
    from genenv_cli.core.errors import ConfigError
    from genenv_cli.machinery.engines import open_engine
    from genenv_cli.machinery.models import ModelRef

    (folder, _) = adapter
    import json

    config = json.loads((folder / "adapter_config.json").read_text())
    config["r"] = 16
    bigger = folder.parent / "lora-r16"
    bigger.mkdir(exist_ok=True)
    (bigger / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="rank 16, above `vllm.max_lora_rank` = 8"):
        open_engine(ModelRef("lora16", str(cache), str(bigger)), engine="vllm",
                    vllm_settings=VLLMConfig(max_lora_rank=8))
