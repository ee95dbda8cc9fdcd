"""The LM head applied inside the loss (training/head_loss.py) under FSDP2 (torch's `fully_shard`, one unit per
decoder layer and the root, as accelerate's FSDP2 wraps a model), on 2 gloo processes: each rank's loss and the
gathered gradients of every parameter equal the route through the logits on the same rank's rows. Under FSDP2 the
head's weight is a shard until the root's forward gathers it; the loss reads it after that forward, and the root is
kept gathered until the backward pass even when `reshard_after_forward=True` is passed, as accelerate passes it."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

SCRIPT = textwrap.dedent('''
    import sys
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    sys.path.insert(0, sys.argv[1])
    import test_head_loss as t
    from genenv_cli.core import memory_plan
    from genenv_cli.machinery.training import logits, rwr
    from genenv_cli.machinery.training.policy_loading import Policy

    memory_plan.LOSS_CHUNK_ELEMENTS = 2 * 3 * t.V  # chunks of 3 positions of a rank's 2 rows
    plain_head = logits.plain_head
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    results = {}
    for tied in (True, False):
        for route in ("fused", "logits"):
            logits.plain_head = plain_head if route == "fused" else (lambda model: None)
            model = t._model(tied)
            reference = t._model(tied, seed=1).eval().requires_grad_(False)
            for layer in model.model.layers:  # as accelerate's FSDP2 wraps: reshard_after_forward given explicitly
                fully_shard(layer, reshard_after_forward=True)
            fully_shard(model, reshard_after_forward=True)
            assert hasattr(model.lm_head.weight, "to_local")  # sharded
            policy = Policy(model=model, tokenizer=None, lora=False, base_name="tiny", reference=reference)
            ids, attn, mask, weights = t._batch()
            mine = slice(2 * rank, 2 * rank + 2)
            n = mask.shape[1]
            loss = rwr.batch_loss(model, policy, ids[mine], attn[mine], n, mask[mine], weights[mine], kl_coef=0.3)[0]
            lp = logits.token_logps(model, ids[mine], attn[mine], n, 0.8)
            (loss + (lp * mask[mine]).sum() / 50).backward()
            grads = {name: p.grad.full_tensor().detach().clone()
                     for name, p in model.named_parameters() if p.grad is not None}
            results[(tied, route)] = {"loss": loss.detach(), "lp": lp.detach(), "grads": grads}
    torch.save(results, f"{sys.argv[2]}.{rank}")
    dist.barrier()
    dist.destroy_process_group()
''')


@pytest.mark.slow
def test_under_fsdp2_the_head_inside_the_loss_equals_the_logits_route(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    env["OMP_NUM_THREADS"] = "1"
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           "29561", str(script), str(Path(__file__).parent), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    for rank in (0, 1):
        results = torch.load(tmp_path / f"out.{rank}")
        for tied in (True, False):
            a, b = results[(tied, "fused")], results[(tied, "logits")]
            assert torch.allclose(a["loss"], b["loss"], atol=1e-6, rtol=1e-5)
            assert torch.allclose(a["lp"], b["lp"], atol=1e-5, rtol=1e-5)
            assert set(a["grads"]) == set(b["grads"]) and len(a["grads"]) >= 20
            head = "model.embed_tokens.weight" if tied else "lm_head.weight"
            assert a["grads"][head].abs().sum() > 0
            for name, g in b["grads"].items():
                assert torch.allclose(a["grads"][name], g, atol=1e-6, rtol=1e-4), name
