"""update-agent's old policy with several processes: each rank computes the old-policy logprobs of its own share
of the rows (one no-grad forward per batch of them) and the ranks sum their tables, so every rank holds the table
one process computes, after 1/world of the forwards, with the same number of forward calls on every rank (a
DDP-, FSDP- or ZeRO-3-wrapped forward is a collective)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from genenv_cli.machinery.training.grpo import old_policy_table

SCRIPT = textwrap.dedent('''
    import json, sys
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from genenv_cli.machinery.training.grpo import old_policy_table

    model_dir, rows_path, out = sys.argv[1:4]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model.eval()
    calls = []
    model.register_forward_hook(lambda m, i, o: calls.append(1))
    # DDP broadcasts buffers at every forward: ranks making different numbers of calls would hang here
    wrapped = torch.nn.parallel.DistributedDataParallel(model)
    rows = json.load(open(rows_path))
    table = old_policy_table(wrapped, rows, width=max(len(r["completion_ids"]) for r in rows), batch_size=3,
                             pad_id=0, temperature=0.9, device="cpu", rank=rank, world=world)
    torch.save({"table": table, "calls": len(calls)}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()
''')


def _rows(n_fresh: int, n_replay: int) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(n_fresh + n_replay):
        p, c = int(torch.randint(3, 9, (1,), generator=g)), int(torch.randint(1, 6, (1,), generator=g))
        rows.append({"prompt_ids": torch.randint(3, 600, (p,), generator=g).tolist(),
                     "completion_ids": torch.randint(3, 600, (c,), generator=g).tolist(),
                     "sampler_logps": [-1.0] * c, "advantage": 1.0, "replay": i >= n_fresh, "index": i})
    return rows


@pytest.mark.slow
@pytest.mark.heavy  # two gloo processes launched per case: about 22 s each on 2 cores
@pytest.mark.parametrize("n_fresh", [12, 13])   # 4 batches of 3 (2 per rank), then 5 (one rank has a spare call)
def test_two_gloo_processes_compute_the_table_one_process_computes(tiny_model, tmp_path, n_fresh):
    from transformers import AutoModelForCausalLM

    rows = _rows(n_fresh, 2)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "ranks.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          str(29541 + n_fresh), str(tmp_path / "ranks.py"), str(tiny_model), str(tmp_path / "rows.json"),
                          str(tmp_path / "table")], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    got = [torch.load(tmp_path / f"table.{r}") for r in (0, 1)]
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.eval()
    one = old_policy_table(model, rows, width=max(len(r["completion_ids"]) for r in rows), batch_size=3, pad_id=0,
                           temperature=0.9, device="cpu")
    batches = -(-n_fresh // 3)
    assert [g["calls"] for g in got] == [-(-batches // 2)] * 2       # half the forwards each, the same number
    for g in got:
        assert torch.equal(g["table"], one)                            # the whole table on every rank, bit for bit
    assert one[n_fresh:].abs().sum() == 0 and one[:n_fresh].abs().sum() > 0   # replayed rows: their sampler's


def test_one_process_computes_every_batch_once(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    calls = []
    model.register_forward_hook(lambda m, i, o: calls.append(i))
    rows = _rows(7, 1)
    table = old_policy_table(model, rows, width=5, batch_size=3, pad_id=0, temperature=1.0, device="cpu")
    assert len(calls) == 3 and table.shape == (8, 5)
