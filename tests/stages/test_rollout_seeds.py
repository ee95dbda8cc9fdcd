"""A rollout sample's noise depends on its task's place in the epoch and on its sample index, never on what else
shares its call or batch: one process and three `--shard I/3` processes draw the same rollouts (the vLLM engine's
side is in tests/engines/test_vllm_engine.py)."""

import pytest
import torch

from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.base import sample_seeds
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve

CONVS = [[{"role": "user", "content": f"Compute {a} + {b}"}] for a, b in [(1, 2), (3, 4), (1, 2), (5, 6), (7, 1)]]


def _tokens(out):
    return [[g.token_ids for g in gens] for gens in out]


@pytest.fixture(scope="module")
def engine(tiny_model):
    eng = HFEngine(resolve(str(tiny_model)), batch_size=4)
    eng.eos_ids = list(range(0, eng.model.config.vocab_size, 11))  # the random model ends rows at random steps
    return eng


def test_seeds_default_to_the_place_in_the_call_and_may_be_given():
    p = SamplingParams(seed=100, n=4)
    assert sample_seeds(p, 3) == [100, 104, 108]
    assert sample_seeds(p, 2, [7, 3]) == [7, 3]
    with pytest.raises(ValueError, match="2 seeds for 3 conversations"):
        sample_seeds(p, 3, [1, 2])


def test_a_conversation_draws_the_same_alone_in_a_batch_or_with_another_batch_size(engine):
    p = SamplingParams(temperature=1.0, max_new_tokens=12, n=3, seed=5)
    seeds = sample_seeds(p, len(CONVS))
    whole = engine.generate(CONVS, p, seeds=seeds)
    assert _tokens(whole)[0] != _tokens(whole)[2]            # a duplicated prompt gets its own noise
    assert len({len(t) for gens in _tokens(whole) for t in gens}) > 1   # rows left their batches at different steps
    for i in range(len(CONVS)):
        alone = engine.generate(CONVS[i:i + 1], p, seeds=seeds[i:i + 1])
        assert _tokens(alone)[0] == _tokens(whole)[i]
        for a, b in zip(alone[0], whole[i], strict=True):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    other = HFEngine(engine.ref, model=engine.model, tokenizer=engine.tokenizer, batch_size=7)
    other.eos_ids = engine.eos_ids
    assert _tokens(other.generate(CONVS, p, seeds=seeds)) == _tokens(whole)
    assert _tokens(engine.generate(CONVS, SamplingParams(temperature=1.0, max_new_tokens=12, n=3, seed=6))) \
        != _tokens(whole)


@pytest.mark.slow
def test_one_process_and_three_shards_draw_identical_rollouts(tmp_path, arith_model):
    """The same epoch rolled out whole and as shards 1/3, 2/3, 3/3 (each its own stage run): every rollout has the
    same tokens, finish reason and seed, and logprobs equal up to batch numerics. Before, each shard restarted the
    per-batch seeds, so task j of every shard drew the same noise and a run changed with the number of GPUs."""
    from test_epochs import arith_run

    from genenv_cli.rundir.datafiles import read_parquet
    from genenv_cli.stages import rollout

    run = arith_run(tmp_path, arith_model, "rollout.temperature=1.0", "rollout.max_new_tokens=8")
    cfg = run.load_config()
    rollout.run(run, cfg, 1)
    whole = read_parquet(run.epoch_dir(1) / "rollouts.parquet", "rollouts").sort("rollout_id")
    parts = []
    for i in range(1, 4):
        rollout.run(run, cfg, 1, shard=(i, 3))
        parts.append(read_parquet(run.epoch_dir(1) / f"rollouts.shard-{i}-of-3.parquet", "rollouts"))
    import polars as pl

    sharded = pl.concat(parts).sort("rollout_id")
    assert sharded["rollout_id"].to_list() == whole["rollout_id"].to_list()
    for col in ("completion_token_ids", "completion", "finish_reason", "prompt_token_ids", "seed"):
        assert sharded[col].to_list() == whole[col].to_list(), col
    tasks = whole["task_id"].n_unique()
    assert len(set(map(tuple, whole["completion_token_ids"].to_list()))) > tasks  # sampled: groups differ inside
    for a, b in zip(sharded["logprobs"].to_list(), whole["logprobs"].to_list(), strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-4)


def test_inverse_cdf_draws_follow_the_distribution_and_never_a_removed_token():
    from genenv_cli.machinery.engines.hf import _inverse_cdf

    logp = torch.log_softmax(torch.tensor([[0.0, 1.0, float("-inf"), 2.0, -1.0]]), -1)
    u = torch.rand(100_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    drawn = _inverse_cdf(logp.expand(len(u), -1), u)
    share = torch.bincount(drawn, minlength=5).double() / len(u)
    assert share[2] == 0 and torch.allclose(share, logp.exp()[0].double(), atol=0.005)
    edge = _inverse_cdf(torch.log_softmax(torch.tensor([[1.0, 0.0, float("-inf")]]), -1),
                        torch.tensor([1.0], dtype=torch.float64))   # u * total == total: past every token
    assert edge.tolist() == [0]
