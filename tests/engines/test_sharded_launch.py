"""The sharded launch: the shipped accelerate config files, `run.sharding` reaching the trainer under any launcher,
a real FSDP update on two CPU processes whose gathered checkpoint loads back equal, and the refusals that stop a
launch which cannot work before any compute."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from genenv_cli.rundir import RunDir
from paths import ROOT
from stagekit import agent_pool

CONFIGS = ROOT / "pipelines" / "accelerate"


def _launch_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "ACCELERATE_", "FSDP_", "MASTER_"))}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def test_shipped_configs_shard_and_gather():
    fsdp = yaml.safe_load((CONFIGS / "fsdp-full-shard.yaml").read_text())
    assert fsdp["distributed_type"] == "FSDP"
    assert fsdp["fsdp_config"]["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    assert fsdp["fsdp_config"]["fsdp_activation_checkpointing"] is False
    zero3 = yaml.safe_load((CONFIGS / "zero3.yaml").read_text())
    assert zero3["distributed_type"] == "DEEPSPEED"
    assert zero3["deepspeed_config"]["zero_stage"] == 3 and zero3["deepspeed_config"]["zero3_save_16bit_model"] is True
    assert yaml.safe_load((CONFIGS / "ddp.yaml").read_text())["distributed_type"] == "MULTI_GPU"


@pytest.mark.slow  # imports transformers' training stack (seconds)
def test_sharding_setting_reaches_the_training_arguments(tmp_path):
    from genenv_cli.catalogue.settings import TrainingConfig
    from genenv_cli.machinery.training.training_loop import training_arguments

    train = TrainingConfig(gradient_checkpointing=True, lora=False)
    args = training_arguments(tmp_path, train, seed=0, device="cpu", sharding="fsdp", timeout=7200)
    assert args.fsdp and args.fsdp_config["version"] == 2
    assert args.fsdp_config["state_dict_type"] == "FULL_STATE_DICT"
    # gradient checkpointing becomes FSDP's own activation checkpointing, never both (transformers refuses both)
    assert args.fsdp_config["activation_checkpointing"] is True and not args.gradient_checkpointing
    assert args.ddp_timeout == 7200
    plain = training_arguments(tmp_path, train, seed=0, device="cpu")
    assert not plain.fsdp and plain.gradient_checkpointing and plain.ddp_timeout == 1800
    from genenv_cli.machinery.training.training_loop import sharding_arguments

    ds = sharding_arguments("zero3", False)["deepspeed"]["zero_optimization"]
    assert ds["stage"] == 3 and ds["stage3_gather_16bit_weights_on_model_save"] is True


def test_the_setting_shards_under_torchrun_and_the_config_file_under_accelerate(monkeypatch):
    from genenv_cli.catalogue.config import config_from_dict
    from genenv_cli.machinery.launch import effective_sharding, sharding_line, trainer_sharding

    for k in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "RANK",
              "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    cfg = config_from_dict({"run": {"sharding": "fsdp"}}, "t")
    # one process, no launcher: nothing to shard over, the setting is dropped and the log says so
    assert effective_sharding(cfg) == trainer_sharding(cfg) == "none"
    assert "run.sharding = \"fsdp\" is dropped" in sharding_line(cfg)
    monkeypatch.setenv("WORLD_SIZE", "2")                                  # torchrun: the trainer's own options
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert effective_sharding(cfg) == trainer_sharding(cfg) == "fsdp"
    assert sharding_line(cfg) == "sharding fsdp over 2 processes (run.sharding)"
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")                 # accelerate launch with zero3.yaml
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    plain = config_from_dict({}, "t")
    assert effective_sharding(plain) == "zero3" and trainer_sharding(plain) == "none"   # not given twice
    assert sharding_line(plain).startswith("sharding zero3 over 2 processes (chosen by the accelerate launch")


@pytest.mark.slow
@pytest.mark.e2e
def test_fsdp_launch_on_two_cpu_processes_saves_a_gathered_checkpoint(make_run, tiny_model):
    """Two gloo processes launched with the shipped FSDP config file: full fine-tuning, the state dict gathered on
    rank 0 by accelerate's get_state_dict, and the checkpoint loads back with the trained weights, in float32.

    On CPU accelerate does not shard: its state switches to FSDP only from a GPU-like process group (MULTI_GPU,
    NPU, XPU, ...), and CPU processes are MULTI_CPU, so the steps here are DDP steps and genenv says so in the log.
    On a machine with two GPUs or more the same test checks that the parameters were DTensor shards."""
    pytest.importorskip("accelerate")
    import torch
    from transformers import AutoModelForCausalLM

    gpus = torch.cuda.device_count()
    run = RunDir(make_run("agent_update.lora=false", "agent_update.learning_rate=0.01", "agent_update.batch_size=2",
                          "agent_update.kl_coef=0", "run.device=" + ("auto" if gpus >= 2 else "cpu")))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / "fsdp-full-shard.yaml"),
           "--num_processes", "2", "--main_process_port", "29531",
           "-m", "genenv_cli", "update-agent", "--epoch", "1", "--run", str(run.root)]
    env = _launch_env()
    if gpus >= 2:
        env["CUDA_VISIBLE_DEVICES"] = "0,1"
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    log = (run.logs_dir() / "update-agent.log").read_text()
    assert "sharding fsdp over 2 processes" in log     # the config file's choice reached genenv
    if gpus >= 2:
        assert "(accelerate: FSDP," in log
        held = re.search(r"parameters sharded, this rank holds ([\d,]+) of ([\d,]+)", log)
        assert held and int(held[1].replace(",", "")) < int(held[2].replace(",", ""))
    else:
        assert "(accelerate: MULTI_CPU," in log and "warning: sharding was asked for" in log
    manifest = json.loads(run.manifest_path(1, "update-agent").read_text())
    assert manifest["counts"]["world_size"] == 2 and manifest["counts"]["steps"] >= 1
    folder = run.epoch_dir(1) / "agent"
    meta = json.loads((folder / "genenv_checkpoint.json").read_text())
    assert meta["kind"] == "full"
    saved = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    sd, b = saved.state_dict(), base.state_dict()
    assert set(sd) == set(b)
    assert all(sd[k].shape == b[k].shape and sd[k].dtype == torch.float32 for k in sd)   # full, gathered, float32
    assert any(not torch.equal(sd[k], b[k]) for k in sd)                                  # the update landed
    from genenv_cli.machinery.training.publishing import parameter_digest

    for p in saved.parameters():
        p.requires_grad_(True)
    assert parameter_digest(saved) == meta["parameter_digest"]   # what rank 0 gathered is what loads back
    assert re.search(r"rank 0 trainable-parameter digest " + meta["parameter_digest"], log)


def _fake_tools(tmp_path: Path, gpus: int) -> tuple[dict[str, str], Path]:
    """A fake `nvidia-smi -L` listing `gpus` GPUs and a fake genenv that records each call with its
    CUDA_VISIBLE_DEVICES."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\\n" for i in range(gpus))
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    calls = tmp_path / "calls.txt"
    (bin_dir / "fake-genenv").write_text(f'#!/bin/sh\necho "$CUDA_VISIBLE_DEVICES|$*" >> {calls}\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GENENV=str(bin_dir / "fake-genenv"))
    env.pop("GPUS", None)
    env.pop("TP", None)
    return env, calls


def test_epoch_script_gives_every_rollout_shard_its_own_gpu(tmp_path):
    env, calls = _fake_tools(tmp_path, 4)
    out = subprocess.run(["bash", str(ROOT / "pipelines" / "epoch.sh"), "RUN", "2"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    shards = sorted(line for line in lines if "rollout" in line)
    assert shards == [f"{i - 1}|rollout --run RUN --epoch 2 --shard {i}/4" for i in range(1, 5)]
    assert any(line.endswith("score --run RUN --epoch 2") for line in lines)
    # tensor parallel 2: two shards of two GPUs each
    calls.unlink()
    out = subprocess.run(["bash", str(ROOT / "pipelines" / "epoch.sh"), "RUN", "2"], env=dict(env, TP="2"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(x for x in calls.read_text().splitlines() if "rollout" in x) == [
        "0,1|rollout --run RUN --epoch 2 --shard 1/2", "2,3|rollout --run RUN --epoch 2 --shard 2/2"]
    # one GPU: one rollout process, no shard
    env1, calls1 = _fake_tools(tmp_path / "one", 1) if (tmp_path / "one").mkdir() is None else (None, None)
    out = subprocess.run(["bash", str(ROOT / "pipelines" / "epoch.sh"), "RUN", "2"], env=env1, capture_output=True,
                         text=True, timeout=60)
    assert [x for x in calls1.read_text().splitlines() if "rollout" in x] == ["|rollout --run RUN --epoch 2"]


def test_paper_script_launches_training_sharded_over_every_gpu(tmp_path):
    env, calls = _fake_tools(tmp_path, 8)
    (tmp_path / "bin" / "accelerate").write_text(f'#!/bin/sh\necho "accelerate $*" >> {calls}\n')
    (tmp_path / "bin" / "accelerate").chmod(0o755)
    out = subprocess.run(["bash", str(ROOT / "pipelines" / "paper.sh"), "RUN"], env=dict(env, EPOCHS="1"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    launches = [line for line in calls.read_text().splitlines() if line.startswith("accelerate")]
    fsdp = f"accelerate launch --config_file {ROOT}/pipelines/accelerate/fsdp-full-shard.yaml --num_processes 8"
    assert launches == [f"{fsdp} -m genenv_cli update-agent --run RUN --epoch 1",
                        f"{fsdp} -m genenv_cli update-env --run RUN --epoch 1"]


@pytest.mark.slow
@pytest.mark.e2e
def test_zero3_launch_on_two_cpu_processes_saves_a_gathered_checkpoint(make_run, tiny_model):
    """The shipped ZeRO-3 config file on two CPU processes, where deepspeed is installed."""
    pytest.importorskip("deepspeed")
    import torch
    from transformers import AutoModelForCausalLM

    run = RunDir(make_run("agent_update.lora=false", "agent_update.learning_rate=0.01", "agent_update.batch_size=2",
                          "agent_update.kl_coef=0", "run.device=cpu", "run.dtype=float32"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / "zero3.yaml"),
           "--num_processes", "2", "--mixed_precision", "no", "--main_process_port", "29533",
           "-m", "genenv_cli", "update-agent", "--epoch", "1", "--run", str(run.root)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_launch_env(), timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    log = (run.logs_dir() / "update-agent.log").read_text()
    assert "sharding zero3 over 2 processes" in log and "(accelerate: DEEPSPEED," in log
    saved = AutoModelForCausalLM.from_pretrained(run.epoch_dir(1) / "agent")
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert any(not torch.equal(a, b) for a, b in zip(saved.state_dict().values(), base.state_dict().values(),
                                                     strict=True))
