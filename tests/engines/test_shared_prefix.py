"""The shared-prefix forward (engines/shared_prefix.py) against transformers' own: the same logits and gradients in
training, the same greedy tokens as `generate()`, and sampled logprobs that a full forward reproduces."""

import pytest
import torch

from genenv_cli.machinery.engines import SamplingParams, shared_prefix
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve
from genenv_cli.machinery.training.logits import completion_logits, pad_pairs

SYSTEM = "You are a careful calculator. Answer with the number only, then stop. Be brief, exact and polite."
CONVS = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
         for q in ("What is 2 + 3?", "Weather in Lima?", "Convert 100 USD to EUR and GBP, please, at today's rate.")]


@pytest.fixture(scope="module")
def engine(tiny_model):
    return HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32", batch_size=8)


def prompts(engine):
    return [engine.prompt_ids(c) for c in CONVS]


def test_the_prompts_share_a_prefix(engine):
    """Otherwise every test below would check the plain path only."""
    assert shared_prefix.supports(engine.model)
    assert shared_prefix.common_length(prompts(engine)) >= 20


def test_training_logits_and_gradients_equal_a_plain_forward(engine):
    model = engine.model
    ps = prompts(engine)
    completions = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
    ids, attn, _ = pad_pairs(ps, completions, engine.pad_id)
    n = ids.shape[1] - max(len(p) for p in ps)
    real = torch.tensor([[1.0] * len(c) + [0.0] * (n - len(c)) for c in completions]).bool()

    def grads(shared: bool):
        model.zero_grad()
        if shared:
            logits = completion_logits(model, ids, attn, n)
        else:
            logits = model(input_ids=ids, attention_mask=attn).logits[:, -n - 1:-1, :]
        (logits.float().log_softmax(-1)[..., 3][real].sum()).backward()  # padding's logits are never used
        return logits.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    model.train()
    try:
        plain, g_plain = grads(False)
        shared, g_shared = grads(True)
    finally:
        model.zero_grad()
        model.eval()
    assert shared_prefix.padded_forward(model, ids, attn, n + 1) is not None  # the shared path was taken
    assert torch.allclose(plain[real], shared[real], atol=1e-5)
    assert g_plain.keys() == g_shared.keys() and g_plain
    for k in g_plain:
        assert torch.allclose(g_plain[k], g_shared[k], atol=1e-5, rtol=1e-4), k


def test_rows_that_share_a_prompt_compute_it_once_with_the_same_logits_and_gradients(engine):
    """A training batch holding several samples of each prompt (a task's K attempts, a context's variations): each
    prompt is run once, and every row's logits and every parameter's gradient equal a plain forward's."""
    model = engine.model
    ps = prompts(engine)
    rows_p = [ps[0], ps[1], ps[0], ps[2], ps[1], ps[0]]
    completions = [[5, 6, 7], [8], [9, 10, 11, 12, 13], [14, 15], [16, 17, 18], [19]]
    ids, attn, _ = pad_pairs(rows_p, completions, engine.pad_id)
    n = ids.shape[1] - max(len(p) for p in rows_p)
    real = torch.tensor([[1.0] * len(c) + [0.0] * (n - len(c)) for c in completions]).bool()
    calls = []
    forward = shared_prefix.grouped_forward

    def spy(*args, **kwargs):
        calls.append(len(args[2]))  # the distinct heads run
        return forward(*args, **kwargs)

    def grads(shared: bool):
        model.zero_grad()
        if shared:
            logits = completion_logits(model, ids, attn, n)
        else:
            logits = model(input_ids=ids, attention_mask=attn).logits[:, -n - 1:-1, :]
        (logits.float().log_softmax(-1)[..., 3][real].sum()).backward()
        return logits.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    model.train()
    shared_prefix.grouped_forward = spy
    try:
        plain, g_plain = grads(False)
        shared, g_shared = grads(True)
    finally:
        shared_prefix.grouped_forward = forward
        model.zero_grad()
        model.eval()
    assert calls == [3]  # three prompts for six rows
    assert torch.allclose(plain[real], shared[real], atol=1e-5)
    assert g_plain.keys() == g_shared.keys() and g_plain
    for k in g_plain:
        assert torch.allclose(g_plain[k], g_shared[k], atol=1e-5, rtol=1e-4), k


def test_greedy_tokens_equal_generate(engine):
    ps = prompts(engine)
    out = engine.generate(CONVS, SamplingParams(temperature=0.0, max_new_tokens=12, n=2))
    for p, gens in zip(ps, out, strict=True):
        with torch.no_grad():
            ref = engine.model.generate(torch.tensor([p]), do_sample=False, max_new_tokens=12,
                                        eos_token_id=engine.eos_ids, pad_token_id=engine.pad_id)[0, len(p):].tolist()
        stop = next((i for i, t in enumerate(ref) if t in engine.eos_ids), None)
        ref = ref if stop is None else ref[:stop + 1]
        assert gens[0].token_ids == gens[1].token_ids == ref


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.8, 0.9)])
def test_samples_leave_the_batch_when_done_and_keep_their_logprobs(engine, temperature, top_p):
    engine = HFEngine(engine.ref, model=engine.model, tokenizer=engine.tokenizer, batch_size=8)
    engine.eos_ids = list(range(0, engine.model.config.vocab_size, 9))  # the random model ends rows at random
    out = engine.generate(CONVS, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=20, n=4,
                                                seed=5))
    lengths = {len(g.token_ids) for gens in out for g in gens}
    assert len(lengths) > 1  # rows finished at different steps: the ones left went on alone
    for gens in out:
        for g in gens:
            ids = torch.tensor([g.prompt_token_ids + g.token_ids])
            with torch.no_grad():
                logits = engine.model(ids).logits[0, len(g.prompt_token_ids) - 1:-1].float() / temperature
            logp = torch.log_softmax(logits, -1)
            if top_p < 1.0:  # the warper's renormalised distribution; a token it would have cut cannot be drawn
                from transformers import TopPLogitsWarper

                logp = torch.log_softmax(TopPLogitsWarper(top_p)(None, logits), -1)
            ref = logp.gather(1, torch.tensor(g.token_ids)[:, None]).squeeze(1)
            assert torch.allclose(ref, torch.tensor(g.logprobs), atol=1e-4)
            assert g.finish_reason == ("stop" if g.token_ids[-1] in engine.eos_ids else "length")
            assert g.finish_reason == "stop" or len(g.token_ids) == 20


def test_a_model_without_position_ids_decodes_without_sharing(engine):
    """A forward that takes neither position_ids nor logits_to_keep (as some remote code) is decoded with a plain
    prefill; one prompt at a time (no padding) its greedy tokens are the full model's."""

    class Bare(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.config, self.generation_config = inner, inner.config, inner.generation_config

        def forward(self, input_ids=None, attention_mask=None, past_key_values=None, use_cache=None):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, past_key_values=past_key_values,
                              use_cache=use_cache)

    bare = HFEngine(engine.ref, model=Bare(engine.model), tokenizer=engine.tokenizer, batch_size=8)
    assert not shared_prefix.supports(bare.model)
    a = bare.generate(CONVS[:1], SamplingParams(temperature=0.0, max_new_tokens=8))
    b = engine.generate(CONVS[:1], SamplingParams(temperature=0.0, max_new_tokens=8))
    assert a[0][0].token_ids == b[0][0].token_ids


def test_tensors_off_the_cpu_take_the_plain_forward(engine):
    """Finding the prefix reads token ids on the host: on an accelerator that would make each micro-step wait."""
    ids = torch.zeros((2, 30), dtype=torch.long, device="meta")
    assert shared_prefix.padded_forward(engine.model, ids, torch.ones_like(ids), 4) is None


def test_the_cache_goes_under_the_name_the_forward_takes():
    """transformers 5.24 renamed `past_key_values` to `cache`: a forward that takes either is shared-prefix capable
    and gets its cache under its own name (the old name on 5.24 only warns, and goes in 5.40)."""

    class Old(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None, logits_to_keep=0):
            return {"got": past_key_values}

    class New(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=None,
                    logits_to_keep=0):
            return {"got": cache}

    for model, name in ((Old(), "past_key_values"), (New(), "cache")):
        model.config = type("C", (), {"is_encoder_decoder": False})()
        assert shared_prefix.cache_name(model) == name
        assert shared_prefix.supports(model)
        assert shared_prefix.call(model, input_ids=1, cache="kv")["got"] == "kv"
