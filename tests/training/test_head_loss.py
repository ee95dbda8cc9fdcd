"""Both updates apply the LM head inside the loss, a chunk of positions at a time (training/head_loss.py): the same
losses and gradients as from the logits (full fine-tuning, LoRA, tied and untied heads, float32 and bf16 autocast),
the exact gradient (gradcheck), and no tensor of (batch x positions x vocabulary) size allocated at all."""

import pytest
import torch

from genenv_cli.machinery.training import head_loss, logits, rwr
from genenv_cli.machinery.training.policy_loading import Policy
from genenv_cli.machinery.training.target_logps import target_logps

V, H = 700, 64


def _model(tied=True, seed=0, model_type="llama"):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    kind = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[model_type]
    cfg = kind[0](vocab_size=V, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=tied, pad_token_id=0)
    model = kind[1](cfg)
    model.config.use_cache = False
    return model.train()


def _batch(B=4, P=14, n=20, seed=3, shared=0):
    g = torch.Generator().manual_seed(seed)
    common = torch.randint(1, V, (shared,), generator=g).tolist()
    prompts = [common + torch.randint(1, V, (P - i,), generator=g).tolist() for i in range(B)]
    targets = [torch.randint(1, V, (n - 2 * i,), generator=g).tolist() for i in range(B)]
    ids, attn, mask = logits.pad_pairs(prompts, targets, 0)
    return ids, attn, mask, torch.rand(B, generator=g) + 0.5


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _no_fused(monkeypatch):
    monkeypatch.setattr(logits, "plain_head", lambda model: None)


def _both(monkeypatch, run, model):
    """run() with the head inside the loss, then from the logits: (results, gradients) of each."""
    got = run()
    got[0].backward()
    got_grads = _grads(model)
    model.zero_grad(set_to_none=True)
    with monkeypatch.context() as m:
        _no_fused(m)
        want = run()
        want[0].backward()
    return got, got_grads, want, _grads(model)


def _close(a, b, tol):
    assert torch.allclose(a.float(), b.float(), atol=tol, rtol=tol), (a - b).abs().max()


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("autocast", [False, True])
def test_update_env_loss_and_gradients_equal_the_logits_route(monkeypatch, lora, tied, autocast):
    monkeypatch.setattr("genenv_cli.core.memory_plan.LOSS_CHUNK_ELEMENTS", 4 * 3 * V)  # chunks of 3 positions
    model = _model(tied)
    reference = None
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 task_type="CAUSAL_LM", init_lora_weights=False))
    else:
        reference = _model(tied, seed=1).eval().requires_grad_(False)
    policy = Policy(model=model, tokenizer=None, lora=lora, base_name="tiny", reference=reference)
    ids, attn, mask, weights = _batch()
    n = mask.shape[1]

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return rwr.batch_loss(model, policy, ids, attn, n, mask, weights, kl_coef=0.3)

    got, got_grads, want, want_grads = _both(monkeypatch, run, model)
    tol = 2e-2 if autocast else 1e-5
    for a, b in zip(got, want, strict=True):
        _close(a, b, tol)
    assert got[2] > 0  # the reference differs: the KL term is exercised
    assert set(got_grads) == set(want_grads) and got_grads
    head = "lm_head.weight" if not tied else "model.embed_tokens.weight"
    assert lora or head in got_grads  # full fine-tuning trains the head (tied: through the embedding too)
    for name in want_grads:
        _close(got_grads[name], want_grads[name], 5e-2 if autocast else 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize(("temperature", "shared"), [(1.0, 0), (0.7, 0), (0.7, 12)])
def test_update_agent_logps_and_gradients_equal_the_logits_route(monkeypatch, tied, temperature, shared):
    """`shared`: the rows begin with the same tokens, so the forward computes them once (engines/shared_prefix.py)."""
    from genenv_cli.machinery.engines import shared_prefix

    monkeypatch.setattr("genenv_cli.core.memory_plan.LOSS_CHUNK_ELEMENTS", 4 * 2 * V)
    model = _model(tied, model_type="qwen2")
    ids, attn, mask, _ = _batch(shared=shared)
    assert shared_prefix.supports(model)
    calls = []
    real = shared_prefix.padded_forward
    monkeypatch.setattr(shared_prefix, "padded_forward", lambda *a: calls.append(1) or real(*a))
    n = mask.shape[1]
    g = torch.Generator().manual_seed(5)
    w = torch.randn(mask.shape, generator=g)

    def run():
        lp = logits.token_logps(model, ids, attn, n, temperature)
        return ((lp * w * mask).sum(), lp)

    got, got_grads, want, want_grads = _both(monkeypatch, run, model)
    if shared:  # the shared-prefix forward computed the logits (or the hidden states) both times
        assert len(calls) == 2 and real(model, ids, attn, mask.shape[1] + 1) is not None
    _close(got[1], want[1], 1e-5)
    for name in want_grads:
        _close(got_grads[name], want_grads[name], 1e-4)


def test_the_backward_passes_are_the_exact_gradients():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 5, 6, dtype=torch.float64, generator=g).requires_grad_()
    w = torch.randn(9, 6, dtype=torch.float64, generator=g).requires_grad_()
    b = torch.randn(9, dtype=torch.float64, generator=g).requires_grad_()
    rh = torch.randn(2, 5, 6, dtype=torch.float64, generator=g)
    rw = torch.randn(9, 6, dtype=torch.float64, generator=g)
    tgt = torch.randint(0, 9, (2, 5), generator=g)
    assert torch.autograd.gradcheck(lambda *x: head_loss.head_target_logps(*x, tgt, 0.8, chunk=2), (h, w, b))
    assert torch.autograd.gradcheck(lambda *x: head_loss.head_token_terms(*x, rh, rw, None, tgt, chunk=2), (h, w, b))


def test_equal_to_the_chunked_losses_on_the_head_logits():
    g = torch.Generator().manual_seed(2)
    h, w = torch.randn(3, 7, 8, generator=g), torch.randn(11, 8, generator=g)
    rh, tgt = torch.randn(3, 7, 8, generator=g), torch.randint(0, 11, (3, 7), generator=g)
    assert torch.allclose(head_loss.head_target_logps(h, w, None, tgt, 0.7, chunk=3),
                          target_logps(h @ w.T, tgt, 0.7), atol=1e-6)
    for a, b in zip(head_loss.head_token_terms(h, w, None, rh, w, None, tgt, chunk=2),
                    rwr.token_terms(h @ w.T, rh @ w.T, tgt), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


class _Sizes(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the element count of every tensor an operation allocates (forward and backward alike)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(r.alias_info is not None for r in func._schema.returns):
            return out  # a view of an existing tensor (an expanded weight, a reshape): nothing allocated
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.slow
@pytest.mark.parametrize("update", ["env", "agent"])
def test_no_batch_by_positions_by_vocabulary_tensor_is_allocated(monkeypatch, update):
    """Every tensor any operation returns during the loss's forward and backward pass, the model's included, is
    counted: through the logits one of (batch x positions x vocabulary) elements is made; with the head inside the
    loss none is (the largest are the head's weight and its gradient, vocabulary x hidden, and one chunk)."""
    monkeypatch.setattr("genenv_cli.core.memory_plan.LOSS_CHUNK_ELEMENTS", 4 * 4 * V)
    model = _model(tied=False)
    policy = Policy(model=model, tokenizer=None, lora=False, base_name="tiny",
                    reference=_model(False, seed=1).eval().requires_grad_(False))
    ids, attn, mask, weights = _batch()
    B, n = mask.shape
    whole = B * n * V
    assert whole > V * H  # so that the weight is not mistaken for the logits

    def largest():
        sizes = _Sizes()
        with sizes:
            if update == "env":
                loss = rwr.batch_loss(model, policy, ids, attn, n, mask, weights, kl_coef=0.1)[0]
            else:
                loss = (logits.token_logps(model, ids, attn, n, 0.9) * mask).sum()
            loss.backward()
        model.zero_grad(set_to_none=True)
        return sizes.largest

    assert largest() < whole
    _no_fused(monkeypatch)
    assert largest() >= whole  # the measure sees the logits where they exist
