"""The GRPO side's target log-probabilities (training/target_logps.py) are computed in chunks of positions: the
same numbers as log_softmax over the whole vocabulary at once, the same gradient (at any temperature), and nothing
of (batch x positions x vocabulary) size kept for the backward pass beyond the logits."""

import pytest
import torch

from genenv_cli.machinery.training.target_logps import target_logps


def whole_vocabulary(logits, targets, temperature):
    z = logits.float()
    if temperature not in (0.0, 1.0):
        z = z / temperature
    return torch.log_softmax(z, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk", [1, 4, None])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_equals_the_whole_vocabulary(dtype, chunk, temperature):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 11, 97, generator=g) * 3).to(dtype).requires_grad_()
    targets = torch.randint(0, 97, (3, 11), generator=g)
    weights = torch.randn(3, 11, generator=g)
    want = whole_vocabulary(logits, targets, temperature)
    (want * weights).sum().backward()
    want_grad, logits.grad = logits.grad.clone(), None
    got = target_logps(logits, targets, temperature, chunk=chunk)
    assert torch.equal(got, want)  # the same operations per position
    (got * weights).sum().backward()
    assert logits.grad.dtype == dtype
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert torch.allclose(logits.grad.float(), want_grad.float(), atol=tol, rtol=tol)


def test_the_backward_pass_is_the_exact_gradient():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 7, dtype=torch.float64, generator=g).requires_grad_()
    targets = torch.randint(0, 7, (2, 5), generator=g)
    assert torch.autograd.gradcheck(lambda z: target_logps(z, targets, 0.8, chunk=2), (logits,))


def test_only_the_logits_are_kept_for_the_backward_pass():
    logits = torch.randn(2, 16, 300, dtype=torch.bfloat16).requires_grad_()
    targets = torch.randint(0, 300, (2, 16))
    full = 2 * 16 * 300

    def kept(fn):
        saved = []

        def pack(t):
            if t.data_ptr() != logits.data_ptr():
                saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(logits, targets, 1.0)
        return sum(saved)

    assert kept(whole_vocabulary) >= 4 * full
    assert kept(target_logps) < full
