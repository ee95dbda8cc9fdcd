"""update-env's loss computes the exact per-token KL and target log-probabilities in chunks of positions: the same
numbers as over the whole vocabulary at once, the same gradient, and no float32 (batch x positions x vocabulary)
tensor kept for the backward pass."""

import pytest
import torch

from genenv_cli.machinery.training import rwr, target_logps
from reference_losses import whole_vocabulary


def _batch(dtype, B=3, T=11, V=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(B, T, V, generator=g) * 3).to(dtype).requires_grad_()
    ref = (torch.randn(B, T, V, generator=g) * 3).to(dtype)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.2).float()
    weights = torch.rand(B, generator=g) + 0.5
    return logits, ref, targets, mask, weights


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("positions", [1, 4, 11, None])
def test_chunked_loss_equals_the_whole_vocabulary_one(monkeypatch, dtype, positions):
    logits, ref, targets, mask, weights = _batch(dtype)
    want = whole_vocabulary(logits, ref, targets, mask, weights, kl_coef=0.3)
    want[0].backward()
    want_grad, logits.grad = logits.grad.clone(), None
    if positions is not None:  # chunks of that many positions
        monkeypatch.setattr("genenv_cli.core.memory_plan.LOSS_CHUNK_ELEMENTS", positions * 3 * 97)
        assert target_logps.chunk_positions(3, 11, 97) == positions
    got = rwr.rwr_loss(logits, ref, targets, mask, weights, kl_coef=0.3)
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)                   # the same operations per position: the same numbers
    got[0].backward()
    assert logits.grad.dtype == dtype
    assert torch.allclose(logits.grad.float(), want_grad.float(), atol=1e-6, rtol=1e-5)


def test_the_backward_pass_is_the_exact_gradient():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 7, dtype=torch.float64, generator=g).requires_grad_()
    ref = torch.randn(2, 5, 7, dtype=torch.float64, generator=g)
    targets = torch.randint(0, 7, (2, 5), generator=g)
    assert torch.autograd.gradcheck(lambda z: rwr.token_terms(z, ref, targets, chunk=2), (logits,))


def test_no_full_vocabulary_float32_tensor_is_kept_for_the_backward_pass():
    """What autograd keeps between the forward and the backward pass, beyond the logits themselves: the whole-
    vocabulary loss kept four (batch x positions x vocab) float32 tensors; the chunked one keeps a (batch x
    positions) one."""
    logits, ref, targets, mask, weights = _batch(torch.bfloat16, B=2, T=16, V=300)
    full = 2 * 16 * 300

    def kept(fn):
        saved = []

        def pack(t):
            if t.data_ptr() not in (logits.data_ptr(), ref.data_ptr()):
                saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(logits, ref, targets, mask, weights, kl_coef=0.1)
        return sum(saved)

    assert kept(whole_vocabulary) >= 4 * 4 * full
    assert kept(rwr.rwr_loss) < 4 * full / 8
