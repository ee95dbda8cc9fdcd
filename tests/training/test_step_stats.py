"""The step's numbers over micro-batches and ranks (training/step_stats.py), and the FSDP2 precision policy genenv sets
(training/precision.py), without a model: fast counterparts of the launches in test_sharded_equivalence.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from genenv_cli.machinery.training.step_stats import step_totals

# two ranks' micro-batches: rank 0 has two, rank 1 two (different tokens and rows)
RANKS = [[{"loss": 1.0, "kl": 0.1, "ratio_dev_max": 0.2, "tokens": 10.0, "rows": 2.0},
          {"loss": 3.0, "kl": 0.3, "ratio_dev_max": 0.1, "tokens": 30.0, "rows": 2.0}],
         [{"loss": 5.0, "kl": 0.5, "ratio_dev_max": 0.7, "tokens": 20.0, "rows": 4.0},
          {"loss": 7.0, "kl": 0.0, "ratio_dev_max": 0.0, "tokens": 40.0, "rows": 4.0}]]


def _pooled(micro: list[dict]) -> dict:
    tokens, rows = sum(m["tokens"] for m in micro), sum(m["rows"] for m in micro)
    return {"loss": sum(m["loss"] * m["rows"] for m in micro) / rows,
            "kl": sum(m["kl"] * m["tokens"] for m in micro) / tokens,
            "ratio_dev_max": max(m["ratio_dev_max"] for m in micro), "tokens": tokens, "rows": rows}


def test_one_process_weighs_token_means_by_tokens_and_sample_means_by_rows():
    got = step_totals(RANKS[0] + RANKS[1])
    want = _pooled(RANKS[0] + RANKS[1])
    assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-12 for k in want)
    assert got["kl"] != sum(m["kl"] for m in RANKS[0] + RANKS[1]) / 4    # not the plain mean of micro-batches
    with pytest.raises(KeyError, match="no rule"):
        step_totals([{"surprise": 1.0, "tokens": 1.0, "rows": 1.0}])


SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torch.distributed as dist
    from genenv_cli.machinery.training.step_stats import step_totals

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ranks = json.loads(sys.argv[1])
    got = step_totals(ranks[rank])
    with open(f"{sys.argv[2]}.{rank}", "w") as fh:
        json.dump(got, fh)
    dist.destroy_process_group()
''')


@pytest.mark.slow
def test_two_ranks_hold_the_whole_steps_numbers(tmp_path):
    """Each of 2 gloo ranks combines its own micro-batches with the other's: both hold the numbers one process holds
    for all four micro-batches (a rank's own share would be rank 0's loss 2.0 against the step's 4.67)."""
    (tmp_path / "ranks.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           "29681", str(tmp_path / "ranks.py"), json.dumps(RANKS), str(tmp_path / "got")],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    want = _pooled(RANKS[0] + RANKS[1])
    for r in (0, 1):
        got = json.loads((tmp_path / f"got.{r}").read_text())
        assert all(abs(got[k] - want[k]) < 1e-12 for k in want), (r, got, want)


def test_genenv_replaces_accelerates_bf16_policy_with_a_float32_reduction():
    """accelerate's own FSDP2 policy for bf16 (what `bf16=True` in the Trainer's arguments builds) reduces gradients
    in bf16; genenv's, set on the same plugin before the model is wrapped, gathers in bf16 and reduces in float32."""
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    from genenv_cli.machinery.training.precision import apply_precision

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2)
    plugin.set_mixed_precision("bf16")                                  # accelerate's GPU branch
    assert plugin.mixed_precision_policy.reduce_dtype == torch.bfloat16

    class Trainer:
        class accelerator:
            class state:
                fsdp_plugin = plugin

    said = apply_precision(Trainer, "bfloat16")
    policy = plugin.mixed_precision_policy
    assert (policy.param_dtype, policy.reduce_dtype, policy.output_dtype) == (torch.bfloat16, torch.float32,
                                                                             torch.bfloat16)
    assert said == "FSDP2 MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32, output_dtype=bfloat16)"
    Trainer.accelerator.state.fsdp_plugin = None                        # no FSDP: nothing to set
    assert apply_precision(Trainer, "bfloat16") is None
