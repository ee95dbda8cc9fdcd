"""Sharded training equals unsharded training: update-agent and update-env launched with each shipped accelerate config
file (pipelines/accelerate/) on 2 gloo processes end with the weights one process reaches on the same pool, and every
trainable tensor moved.

The runs are the real CLI stages. Two processes take micro-batches of `batch_size` rows each per optimizer step, so
the one-process run takes the same rows in `grad_accum = 2` micro-batches of the same size: each micro-batch's loss is
the same mean over the same rows, the ranks' gradients are averaged as the accumulated ones are, and the data order,
the learning-rate schedule and the number of steps are the same. What differs is float32 summation order (gloo's
reductions, FSDP's reduce-scatter, the one process's shared-prefix forward). AdamW divides each step by the gradient's
own running size, so a relative gradient difference of about 1e-7 moves a weight by about 1e-7 of a step; more only
where a gradient is near zero (it cancels out over the rows, and its rounding is then large relative to it), and never
more than a step there. So each tensor must be within 10% of its largest move in the one-process run everywhere, and
within 1% of its mean move on average (measured: at most 3.6% and 0.001% after one step, 0.16% and under 0.001% after
four). A wrong shard, a slot updating another parameter or a shard that never updates differs by a whole move on a
share of the tensor (with the meta-device route ranks >= 1 once took: half of every tensor unmoved, 96-100% of its
largest move, the LM head moved 26 times too far).

FSDP on CPU: accelerate trains CPU processes unsharded (MULTI_CPU) whatever the config file says, so the FSDP launches
here start `fsdp_on_cpu.py`, which keeps accelerate's FSDP plugin on a gloo process group: `Accelerator.prepare` then
takes the route it takes on GPUs (Trainer's optimizer created before `fully_shard`, its slots swapped for the shards,
rank 0's weights broadcast, the full state dict gathered on rank 0). zero3.yaml is not run: accelerate never enables
DeepSpeed for CPU processes (its state takes DeepSpeed only `not cpu`), and DeepSpeed is not installed for the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from genenv_cli.rundir import RunDir
from paths import ROOT
from stagekit import agent_pool, env_pool
from tiny import SMALL

CONFIGS = ROOT / "pipelines" / "accelerate"
DRIVER = Path(__file__).with_name("fsdp_on_cpu.py")
WORST, MEAN = 0.10, 0.01   # of each tensor's largest and mean move in the one-process run (module docstring)
# per step, relative (the loss also absolute: GRPO's first step is a mean of advantages, zero up to rounding)
TOLERANCE = {"float32": {"grad_norm": 1e-3, "loss": 1e-3, "loss_floor": 1e-6},
             "bfloat16": {"grad_norm": 0.05, "loss": 0.05, "loss_floor": 1e-3}}
FULL_LR = 2e-6          # full fine-tuning: a step far below bf16's resolution at the tiny model's weights (~0.02)
LORA_LR = 1e-3

# heavy: several gloo launches of a minute or more each; `nox -s heavy` runs them (CI too)
pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.heavy]


def _settings(role: str, lora: bool, dtype: str = "float32") -> list[str]:
    section = f"{role}_update"
    sets = [f"{section}.lora={str(lora).lower()}", f"{section}.learning_rate={LORA_LR if lora else FULL_LR}",
            f"{section}.batch_size=2", f"{section}.passes=1", f"{section}.warmup_ratio=0", f"run.dtype={dtype}"]
    if role == "env":
        sets.append("env_update.kl_max=100")   # the leash never stops these few steps
    return sets


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model) -> dict[str, Path]:
    """The model each role trains: the agent an untied copy of the tiny model (its own LM head, as the paper's 7B
    model has), the environment the tiny model itself (head tied to the embedding, as small Qwen models have)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tmp_path_factory.mktemp("untied")
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(folder)
    return {"agent": folder, "env": tiny_model}


@pytest.fixture(scope="module")
def pools(tmp_path_factory, models) -> dict[str, Path]:
    """Run folders whose epoch 1 is scored: `mixed` (4 agent groups of 4 with mixed rewards: 8 micro-batches of 2; 8
    environment pairs: 4 micro-batches), `single` (one agent group of 2: one micro-batch, so rank 1's share is empty),
    `equal` (every agent group all-equal: nothing to train) and `twelve` (3 agent groups of 4: 12 rows, a whole
    number of steps of 6 rows for 1, 2 and 3 ranks)."""
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config

    out = {}
    for name, groups in (("mixed", {f"t{i}": [1.0, 0.0, 1.0, 0.0] for i in range(4)}), ("single", {"t0": [1.0, 0.0]}),
                         ("equal", {f"t{i}": [1.0, 1.0, 1.0, 1.0] for i in range(4)}),
                         ("twelve", {f"t{i}": [1.0, 0.0, 0.0, 1.0 if i else 0.5] for i in range(3)})):
        root = tmp_path_factory.mktemp("equivalence") / name
        root.mkdir()
        data = apply_overrides({"run": {"domain": "tool_call"}, "agent": {"model": str(models["agent"])},
                                "env": {"model": str(models["env"])}}, SMALL + ["run.device=cpu"])
        (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
        run = RunDir(root)
        agent_pool(run, models["agent"], 1, groups)
        env_pool(run, 1, [0.1 * i for i in range(8)], [True] * 8)
        out[name] = root
    return out


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "ACCELERATE_", "FSDP_", "MASTER_"))}
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = "1"
    return env


def _stage(pool: Path, folder: Path, role: str, sets: list[str], launch: list[str]) -> RunDir:
    """Run update-<role> of epoch 1 on a copy of `pool` (one process when `launch` is empty)."""
    shutil.copytree(pool, folder)
    args = [f"update-{role}", "--epoch", "1", "--run", str(folder)] + [x for s in sets for x in ("--set", s)]
    cmd = [sys.executable, *(launch or ["-m", "genenv_cli"]), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return RunDir(folder)


def _two_processes(config: str, port: int, processes: int = 2) -> list[str]:
    entry = [str(DRIVER)] if config.startswith("fsdp") else ["-m", "genenv_cli"]
    return ["-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / config), "--num_processes",
            str(processes), "--main_process_port", str(port), *entry]


def _steps(run: RunDir, role: str) -> list[dict]:
    import polars as pl

    return pl.read_parquet(run.file(f"{role}_update_steps", 1)).to_dicts()


def _manifest(run: RunDir, role: str) -> dict:
    return json.loads(run.manifest_path(1, f"update-{role}").read_text())


def _close(a: float | None, b: float | None, rel: float, floor: float = 0.0) -> bool:
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b)) + floor


def _trainable(folder: Path | str, role: str, base: Path, sets: list[str]) -> dict[str, torch.Tensor]:
    """The trainable tensors of a model as genenv loads it to train (for a checkpoint: the way the next epoch reads
    it back), by plain name, float32 as trained."""
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.machinery.training.publishing import plain_name

    train = getattr(config_from_dict(apply_overrides({}, sets), "t"), f"{role}_update")
    policy = load_policy(str(folder), "x", base_name=str(base), train=train, need_reference=False,
                         device="cpu", dtype="float32", trust_remote_code=False, seed=0 + 1)  # run.seed 0, epoch 1
    return {plain_name(n): p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}


_ONE: dict[tuple[str, str, bool, str], tuple[dict[str, torch.Tensor], RunDir]] = {}   # shared by the configs


def _one_process(pool: Path, tmp_path_factory, role: str, lora: bool, base: Path,
                 dtype: str) -> tuple[dict[str, torch.Tensor], RunDir]:
    """The one-process run's trained tensors and its run folder (steps, manifest)."""
    if (pool.name, role, lora, dtype) not in _ONE:
        sets = _settings(role, lora, dtype) + [f"{role}_update.grad_accum=2"]
        run = _stage(pool, tmp_path_factory.mktemp("one") / "run", role, sets, [])
        _ONE[(pool.name, role, lora, dtype)] = (_trainable(run.epoch_dir(1) / role, role, base, sets), run)
    return _ONE[(pool.name, role, lora, dtype)]


def _bf16_spacing(w: torch.Tensor) -> torch.Tensor:
    """bf16's distance between neighbouring values at each weight (8 bits of mantissa)."""
    return torch.exp2(torch.floor(torch.log2(w.abs().clamp(min=1e-30))) - 7)


def _first_step_grad_norm(pool: Path, model: Path, sets: list[str]) -> float:
    """update-agent's first-step gradient norm over all of a pool's rows in one batch, from the loss functions
    themselves (float32, no Trainer): the old policy is the model itself (ratio 1), the sampler's logprobs enter
    through the importance weight, the KL term's gradient is 0 at the reference. A gradient scaled the same way on
    every route shows here, where the layouts' comparison cannot see it."""
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict
    from genenv_cli.machinery.training.grpo import collate, grpo_loss
    from genenv_cli.machinery.training.logits import token_logps
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.stages.update_agent import select_samples

    u = config_from_dict(apply_overrides({}, sets), "t").agent_update
    partition = RunDir(pool).pool_partition("agent_train", 1)
    import polars as pl

    temperature = float(pl.read_parquet(partition)["temperature"][0])
    rows, _ = select_samples(partition, [], temperature)
    policy = load_policy(str(model), "x", base_name=str(model), train=u, need_reference=False, device="cpu",
                         dtype="float32", trust_remote_code=False, seed=1)
    batch = collate([{**r, "index": i} for i, r in enumerate(rows)], policy.tokenizer.pad_token_id)
    n = batch["completion_mask"].shape[1]
    logps = token_logps(policy.model, batch["input_ids"], batch["attention_mask"], n, temperature)
    loss, _ = grpo_loss(logps, logps.detach(), batch["advantages"], batch["completion_mask"], clip_eps=u.clip_eps,
                        kl_coef=0.0, loss_type=u.loss_type, replay=batch["replay"], replay_clip=u.replay_clip,
                        sampler_logps=batch["sampler_logps"], is_cap=u.is_cap)
    loss.backward()
    return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in policy.model.parameters()
                                if p.grad is not None)))


def _expected_precision(dtype: str, config: str | None) -> dict[str, str | None]:
    """The dtypes the trainer must hold (training/precision.py): float32 weights, gradients and reduction, compute in
    the run's dtype; under FSDP2 the gathered weights in it too."""
    held = {"weights": "float32", "compute": dtype, "grads": "float32", "reduce": "float32" if config else None}
    if config and config.startswith("fsdp"):
        held["gathered"] = dtype
    return held


@pytest.mark.parametrize(("config", "role", "lora", "pool", "dtype", "port"), [
    ("fsdp-full-shard.yaml", "agent", False, "mixed", "float32", 29611),
    ("fsdp-full-shard.yaml", "env", False, "mixed", "float32", 29612),
    ("ddp.yaml", "agent", True, "mixed", "float32", 29613),
    ("ddp.yaml", "env", True, "mixed", "float32", 29614),
    # one micro-batch for two ranks: rank 1 has no rows of its own (accelerate hands it a copy of rank 0's, whose
    # gradient is the same, and its old-policy forwards are thrown away), so the mean is rank 0's batch's
    ("fsdp-full-shard.yaml", "agent", False, "single", "float32", 29616),
    # bf16 compute over float32 weights: FSDP2's policy as genenv sets it against one process's autocast
    ("fsdp-full-shard.yaml", "agent", False, "mixed", "bfloat16", 29617),
    ("ddp.yaml", "env", True, "mixed", "bfloat16", 29618),
])
def test_two_processes_train_what_one_process_trains(pools, models, tmp_path_factory, config, role, lora, pool, dtype,
                                                      port):
    sets = _settings(role, lora, dtype) + [f"{role}_update.grad_accum=1"]
    run = _stage(pools[pool], tmp_path_factory.mktemp("two") / "run", role, sets, _two_processes(config, port))
    log = (run.logs_dir() / f"update-{role}.log").read_text()
    if config.startswith("fsdp"):
        assert "(accelerate: FSDP," in log and "parameters sharded, this rank holds" in log   # really sharded
    manifest = _manifest(run, role)
    assert manifest["counts"]["world_size"] == 2
    start = _trainable(models[role], role, models[role], sets)
    two = _trainable(run.epoch_dir(1) / role, role, models[role], sets)
    one, one_run = _one_process(pools[pool], tmp_path_factory, role, lora, models[role], dtype)
    # the dtypes in play, as each trainer held them
    assert manifest["counts"]["precision"] == _expected_precision(dtype, config)
    assert _manifest(one_run, role)["counts"]["precision"] == _expected_precision(dtype, None)
    # each step's gradient norm before clipping and its loss: Adam's step does not show a gradient's scale
    tol = TOLERANCE[dtype]
    steps_one, steps_two = _steps(one_run, role), _steps(run, role)
    assert len(steps_two) == len(steps_one) >= 1
    for a, b in zip(steps_one, steps_two, strict=True):
        assert a["step"] == b["step"] and a["grad_norm"] > 0
        assert _close(a["grad_norm"], b["grad_norm"], tol["grad_norm"]), (a["step"], a["grad_norm"], b["grad_norm"])
        assert _close(a["loss"], b["loss"], tol["loss"], tol["loss_floor"]), (a["step"], a["loss"], b["loss"])
    if pool == "single":   # one step over every row: its gradient norm against one computed here from the loss
        assert _close(steps_one[0]["grad_norm"], _first_step_grad_norm(pools[pool], models[role], sets), 1e-3)
    if dtype != "float32":
        return   # bf16 rounds the gradients differently on the two routes: their norms and losses, not the weights
    lr = LORA_LR if lora else FULL_LR
    assert set(two) == set(one) == set(start) and len(start) >= 8
    for name, w0 in start.items():
        move, diff = (one[name] - w0).abs(), (two[name] - one[name]).abs()
        assert (two[name] - w0).abs().max().item() > 0.1 * lr, f"{name} did not move"
        assert diff.max() <= WORST * move.max(), f"{name}: differs by {diff.max():.3g} from one process, which " \
                                                 f"moved it by up to {move.max():.3g}"
        assert diff.mean() <= MEAN * move.mean(), f"{name}: differs by {diff.mean():.3g} on average from one " \
                                                  f"process, which moved it by {move.mean():.3g} on average"
    if not lora:
        # full fine-tuning keeps its float32 master weights through the checkpoint: most of these updates are below
        # half of bf16's spacing at their weight (a bf16 checkpoint would read back the old weight) and survive
        allw = torch.cat([w.flatten() for w in start.values()])
        step = torch.cat([(two[n] - start[n]).flatten() for n in start])
        below = step.abs() < _bf16_spacing(allw) / 2
        assert below.float().mean() > 0.5 and (step[below] != 0).float().mean() > 0.5
        assert all(t.dtype == torch.float32 for t in two.values())


def test_fsdp_with_nothing_to_train_publishes_the_starting_weights(pools, models, tmp_path_factory):
    """Every group all-equal: no rank has a row. The FSDP launch completes (no rank reads an empty model's weights
    to check them) and the checkpoint holds the starting weights."""
    sets = _settings("agent", False)
    run = _stage(pools["equal"], tmp_path_factory.mktemp("empty") / "run", "agent", sets,
                 _two_processes("fsdp-full-shard.yaml", 29615))
    manifest = json.loads(run.manifest_path(1, "update-agent").read_text())
    assert manifest["counts"]["steps"] == 0 and manifest["counts"]["world_size"] == 2
    start = _trainable(models["agent"], "agent", models["agent"], sets)
    saved = _trainable(run.epoch_dir(1) / "agent", "agent", models["agent"], sets)
    assert set(saved) == set(start) and all(torch.equal(saved[n], start[n]) for n in start)


STAT_COLUMNS = ("loss", "policy_loss", "kl", "clip_frac", "ratio_mean", "ratio_dev_max", "is_weight_mean",
                "is_truncated", "tokens", "grad_norm")


def test_per_step_statistics_are_the_steps_on_1_2_and_3_ranks(pools, models, tmp_path_factory):
    """The same pool (12 rows, micro-batches of one row) trained as 2 steps of 6 rows a pass: one process with
    grad_accum 6, 2 ranks with 3, 3 ranks with 2 (DDP, LoRA, a KL term, a narrow clip band so that rows clip). Every
    per-step number of the steps parquet and metrics.json is the step's: the same in every layout to float tolerance
    (a rank's own micro-batches would give rank 0's share: loss 0.866 on 2 ranks against 3e-08 in one process), and
    the tokens of a pass are every row's completion tokens."""
    import polars as pl

    base = ["agent_update.lora=true", f"agent_update.learning_rate={LORA_LR}", "agent_update.batch_size=1",
            "agent_update.passes=2", "agent_update.warmup_ratio=0", "agent_update.kl_coef=0.05",
            "agent_update.clip_eps=0.02", "run.dtype=float32"]
    runs = {}
    for n, port in ((1, 0), (2, 29621), (3, 29622)):
        launch = _two_processes("ddp.yaml", port, n) if n > 1 else []
        runs[n] = _stage(pools["twelve"], tmp_path_factory.mktemp(f"stats{n}") / "run", "agent",
                         base + [f"agent_update.grad_accum={6 // n}"], launch)
    one = _steps(runs[1], "agent")
    pool = pl.read_parquet(runs[1].pool_partition("agent_train", 1))
    completion_tokens = float(pool["completion_token_ids"].list.len().sum())
    assert len(one) == 4 and one[0]["tokens"] + one[1]["tokens"] == completion_tokens
    assert any(s["clip_frac"] > 0 for s in one) and all(s["kl"] >= 0 for s in one) and one[-1]["kl"] > 0
    m1 = _manifest(runs[1], "agent")
    for n in (2, 3):
        other = _steps(runs[n], "agent")
        assert _manifest(runs[n], "agent")["counts"]["world_size"] == n
        assert [s["step"] for s in other] == [s["step"] for s in one]
        for a, b in zip(one, other, strict=True):
            for col in STAT_COLUMNS:
                assert _close(a[col], b[col], 1e-3, 1e-6), f"{n} ranks, step {a['step']}, {col}: {b[col]} " \
                                                           f"against {a[col]} in one process"
        mn = _manifest(runs[n], "agent")
        for key in ("loss_mean", "kl_mean", "clip_frac_mean"):
            assert _close(m1["metrics"][key], mn["metrics"][key], 1e-3, 1e-6), (n, key)
        derived = json.loads((runs[n].epoch_dir(1) / "metrics.json").read_text())   # metrics.json: the same
        for key, source in (("agent_loss", "loss_mean"), ("agent_kl", "kl_mean")):
            assert derived[key] == mn["metrics"][source] and _close(derived[key], m1["metrics"][source], 1e-3, 1e-6)


def test_the_kl_cap_stops_at_the_same_step_in_every_layout(pools, tmp_path_factory):
    """update-env (RWR, LoRA) with grad_accum > 1: 6 steps of 4 one-pair micro-batches in one process, of 2 on each
    of 2 ranks. An uncapped run gives each step's KL; kl_max set between the largest KL before the step with the
    largest KL and that KL. Capped, one process and 2 ranks both stop at that step, and the KL they stop on is that
    step's own (the token mean over its micro-batches and ranks), not one micro-batch's; the steps they took have
    the uncapped run's loss, NLL and KL (update-env's per-step numbers are the step's too)."""
    base = ["env_update.lora=true", "env_update.learning_rate=0.003", "env_update.batch_size=1",
            "env_update.passes=3", "env_update.warmup_ratio=0", "run.dtype=float32"]
    free = _stage(pools["mixed"], tmp_path_factory.mktemp("free") / "run", "env",
                  base + ["env_update.grad_accum=4", "env_update.kl_max=100"], [])
    kls = [s["kl"] for s in _steps(free, "env")]
    assert len(kls) == 6 and kls[0] == 0.0
    top = max(range(2, 6), key=lambda i: kls[i])
    cap = (kls[top] + max(kls[:top])) / 2
    assert max(kls[:top]) < cap < kls[top]
    for n, port in ((1, 0), (2, 29623)):
        sets = base + [f"env_update.grad_accum={4 // n}", f"env_update.kl_max={cap!r}"]
        run = _stage(pools["mixed"], tmp_path_factory.mktemp(f"cap{n}") / "run", "env", sets,
                     _two_processes("ddp.yaml", port, n) if n > 1 else [])
        steps = _steps(run, "env")
        metrics = _manifest(run, "env")["metrics"]
        assert metrics["kl_stopped"] is True and metrics["stopped_at_step"] == top + 1, (n, metrics, kls, cap)
        assert [s["stopped_by_kl"] for s in steps] == [False] * top + [True]
        assert _close(steps[-1]["kl"], kls[top], 1e-4), (n, steps[-1]["kl"], kls[top])   # the whole step's KL
        for got, want in zip(steps[:-1], _steps(free, "env")[:top], strict=True):
            for col in ("loss", "nll", "kl", "grad_norm"):
                assert _close(got[col], want[col], 1e-3, 1e-7), (n, got["step"], col, got[col], want[col])
