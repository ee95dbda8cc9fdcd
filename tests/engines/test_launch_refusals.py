"""Launches that cannot work are refused before any model is loaded, naming the key or the config file to use:
several GPUs without a distributed launcher (never nn.DataParallel), a full fine-tune too large for one GPU
without sharding, conflicting checkpointing settings, ZeRO-3 that cannot gather on save; and, when the config is
read, a LoRA rank vLLM cannot serve under engine auto and temperatures vLLM would change."""

import json

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import Config, config_from_dict
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError
from genenv_cli.core.memory_plan import QWEN25
from genenv_cli.machinery.launch import check_update_launch

runner = CliRunner()
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED",
               "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",
               "ACCELERATE_DEEPSPEED_CONFIG_FILE", "FSDP_ACTIVATION_CHECKPOINTING", "ACCELERATE_MIXED_PRECISION")


@pytest.fixture
def gpus(monkeypatch):
    """fake(n, gb): n visible CUDA devices of gb GB each, and no launcher variables."""
    import torch

    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)

    def fake(n: int, gb: float = 80.0) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr("genenv_cli.machinery.launch.device_bytes", lambda: int(gb * 1e9))

    return fake


def _seven_b(tmp_path, monkeypatch):
    """A local model folder with Qwen2.5-7B's config.json (no weights: only the shape is read)."""
    s = QWEN25["7B"]
    folder = tmp_path / "qwen7b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": s.hidden, "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
        "num_key_value_heads": s.kv_heads, "intermediate_size": s.intermediate, "vocab_size": s.vocab,
        "tie_word_embeddings": s.tied}))
    return str(folder)


def test_several_gpus_without_a_launcher_are_refused_never_data_parallel(gpus, monkeypatch):
    gpus(8)
    with pytest.raises(ConfigError, match=r"8 GPUs are visible.*nn.DataParallel.*CUDA_VISIBLE_DEVICES=0.*"
                                          r"pipelines/accelerate/fsdp-full-shard.yaml"):
        check_update_launch(Config(), "agent_update", "embedded")
    gpus(1)
    assert check_update_launch(Config(), "agent_update", "embedded") == "none"   # one GPU: fine
    gpus(8)
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert check_update_launch(Config(), "agent_update", "embedded") == "none"   # launched: DDP over 8


def test_the_cli_exits_2_before_loading_anything(gpus, make_run):
    gpus(4)
    run = make_run()
    r = runner.invoke(app, ["update-agent", "--epoch", "1", "--run", str(run)])
    assert r.exit_code == 2 and "nn.DataParallel" in r.output


def test_full_finetune_of_7b_on_one_gpu_is_refused_with_the_config_file(gpus, tmp_path, monkeypatch):
    model = _seven_b(tmp_path, monkeypatch)
    cfg = config_from_dict({"agent": {"model": model}, "agent_update": {"lora": False}}, "t")
    gpus(1, 80)
    with pytest.raises(ConfigError, match=r"`agent_update.lora` = false fine-tunes all 7.6 B parameters.*"
                                          r"more than this GPU's 80 GB.*pipelines/accelerate/fsdp-full-shard.yaml"):
        check_update_launch(cfg, "agent_update", model)
    # sharded over 8: 16 bytes x 7.6 B / 8 + the reference fits in 80 GB
    gpus(8, 80)
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert check_update_launch(cfg, "agent_update", model) == "fsdp"
    # under torchrun the setting does it
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    torchrun = config_from_dict({"agent": {"model": model}, "agent_update": {"lora": False},
                                 "run": {"sharding": "fsdp"}}, "t")
    assert check_update_launch(torchrun, "agent_update", model) == "fsdp"
    # but FSDP over 2 GPUs of 40 GB is still too little
    monkeypatch.setenv("WORLD_SIZE", "2")
    gpus(2, 40)
    with pytest.raises(ConfigError, match=r"fsdp over 2 processes still needs \d+ GB per GPU"):
        check_update_launch(torchrun, "agent_update", model)


def test_fsdp_activation_checkpointing_with_gradient_checkpointing_is_refused(gpus, monkeypatch):
    gpus(0)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "true")
    cfg = config_from_dict({"env_update": {"gradient_checkpointing": True}}, "t")
    with pytest.raises(ConfigError, match=r"`env_update.gradient_checkpointing` = true.*FSDP's activation "
                                          r"checkpointing.*pipelines/accelerate/fsdp-full-shard.yaml"):
        check_update_launch(cfg, "env_update", "embedded")
    assert check_update_launch(Config(), "env_update", "embedded") == "fsdp"  # checkpointing off: fine


def test_zero3_without_16bit_gathering_on_save_is_refused(gpus, monkeypatch, tmp_path):
    gpus(0)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "false")
    with pytest.raises(ConfigError, match=r"ZeRO-3 is launched without gathering 16-bit weights.*"
                                          r"pipelines/accelerate/zero3.yaml"):
        check_update_launch(Config(), "agent_update", "embedded")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true")
    fp32 = config_from_dict({"run": {"dtype": "float32"}}, "t")          # ZeRO-3 trains only in float32
    assert check_update_launch(fp32, "agent_update", "embedded") == "zero3"
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", str(ds))
    with pytest.raises(ConfigError, match="zero3.yaml"):
        check_update_launch(Config(), "agent_update", "embedded")


@pytest.mark.parametrize("engine", ["auto", "vllm"])
def test_lora_rank_above_vllm_max_is_refused_whenever_vllm_may_serve(engine):
    with pytest.raises(ConfigError, match=r"`agent_update.lora_r` = 128 is above `vllm.max_lora_rank` = 64"):
        config_from_dict({"run": {"engine": engine}, "agent_update": {"lora_r": 128}}, "t")
    config_from_dict({"run": {"engine": "hf"}, "agent_update": {"lora_r": 128}}, "t")     # transformers only


@pytest.mark.parametrize("key", ["generate.temperature", "rollout.temperature", "evaluate.temperature"])
def test_temperatures_vllm_would_raise_are_refused(key):
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=rf"`{key}` = 0.005: vLLM raises temperatures below 0.01"):
        config_from_dict({section: {name: 0.005}}, "t")
    config_from_dict({section: {name: 0.01}}, "t")


def test_genenv_run_trains_on_one_gpu_when_several_are_visible(monkeypatch):
    from genenv_cli.actions.runner import child_env

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert child_env("update-agent", 8)["CUDA_VISIBLE_DEVICES"] == "0"
    assert child_env("update-env", 8)["CUDA_VISIBLE_DEVICES"] == "0"
    assert child_env("rollout", 8) is None and child_env("update-agent", 1) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert child_env("update-agent", 8) is None       # the user's choice stands


def test_one_process_drops_the_sharding_setting_and_says_so(gpus):
    """`--preset paper` sets run.sharding = "fsdp"; its one-GPU route adds LoRA. One process without a launcher has
    nothing to shard over: the setting is dropped (transformers would refuse FSDP when the Trainer is built, after
    the models, generation and scoring), the trainer gets no FSDP options, and the stage's log says why."""
    from genenv_cli.machinery.launch import effective_sharding, sharding_line, trainer_sharding

    cfg = config_from_dict({"run": {"sharding": "fsdp"}, "agent_update": {"lora": True},
                            "env_update": {"lora": True}}, "t")
    gpus(1)
    assert check_update_launch(cfg, "agent_update", "embedded") == "none"
    assert check_update_launch(cfg, "env_update", "embedded") == "none"
    assert effective_sharding(cfg) == trainer_sharding(cfg) == "none"
    assert sharding_line(cfg) == ("sharding none over 1 process: run.sharding = \"fsdp\" is dropped, a single process "
                                  "without a launcher has nothing to shard over (launch with accelerate or torchrun "
                                  "to shard)")
    gpus(8)   # eight GPUs and no launcher: still refused (genenv run pins training to GPU 0 for this reason)
    with pytest.raises(ConfigError, match="nn.DataParallel"):
        check_update_launch(cfg, "agent_update", "embedded")


def test_the_preset_full_fine_tune_in_one_process_is_refused_naming_the_launch(gpus, tmp_path, monkeypatch):
    """The preset as it is (full fine-tuning, run.sharding = "fsdp") started on one GPU: sharding is dropped, and the
    unsharded 7B state cannot fit, so it is refused before anything loads, naming the launch and the LoRA route."""
    model = _seven_b(tmp_path, monkeypatch)
    cfg = config_from_dict({"agent": {"model": model}, "agent_update": {"lora": False},
                            "run": {"sharding": "fsdp"}}, "t")
    gpus(1, 80)
    with pytest.raises(ConfigError, match=r"`agent_update.lora` = false fine-tunes all 7.6 B parameters.*"
                                          r"pipelines/accelerate/fsdp-full-shard.yaml.*agent_update.lora = true"):
        check_update_launch(cfg, "agent_update", model)


def test_an_fsdp_setting_under_a_deepspeed_launch_is_refused(gpus, monkeypatch):
    """The setting and the launch's config file must agree: before, run.sharding = "fsdp" under zero3.yaml logged
    "sharding fsdp" while DeepSpeed trained."""
    gpus(0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true")
    cfg = config_from_dict({"run": {"sharding": "fsdp"}}, "t")
    with pytest.raises(ConfigError, match=r"run.sharding = \"fsdp\" but the launch uses DeepSpeed.*"
                                          r"pipelines/accelerate/fsdp-full-shard.yaml.*run.sharding = \"zero3\""):
        check_update_launch(cfg, "agent_update", "embedded")
    for setting in ("zero3", "none"):
        ok = config_from_dict({"run": {"sharding": setting, "dtype": "float32"}}, "t")
        assert check_update_launch(ok, "agent_update", "embedded") == "zero3"


@pytest.mark.slow
def test_the_preset_one_gpu_lora_route_trains_in_one_process(gpus, tiny_model, tmp_path, monkeypatch):
    """README's one-GPU route, `--preset paper` with `agent_update.lora=true env_update.lora=true`, as a single
    process on a machine showing one GPU: both updates train (before: transformers raised "Using fsdp only works in
    distributed training" when the Trainer was built), and each stage's log says the sharding was dropped."""
    from genenv_cli.rundir import RunDir
    from stagekit import agent_pool, env_pool

    gpus(0)  # torch itself sees no GPU: the models train on this CPU ...
    monkeypatch.setattr("genenv_cli.machinery.launch.visible_gpus", lambda device: 1)  # ... and the launch checks see one
    monkeypatch.setattr("genenv_cli.machinery.launch.device_bytes", lambda: int(80e9))
    root = tmp_path / "run"
    sets = ["agent_update.lora=true", "env_update.lora=true", "agent_update.learning_rate=0.0001",
            "env_update.learning_rate=0.0001", "agent_update.batch_size=4", "env_update.batch_size=4",
            "env_update.kl_max=100", "run.device=cpu"]
    r = runner.invoke(app, ["init", str(root), "--preset", "paper", "--agent-model", str(tiny_model),
                            "--env-model", str(tiny_model), *[a for s in sets for a in ("--set", s)]])
    assert r.exit_code == 0, r.output
    run = RunDir(root)
    cfg = run.load_config()
    assert cfg.run.sharding == "fsdp" and cfg.agent_update.gradient_checkpointing
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    env_pool(run, 1, [1.0, 0.9], [True, True])
    for stage in ("update-agent", "update-env"):
        r = runner.invoke(app, [stage, "--epoch", "1", "--run", str(root), "--json"])
        assert r.exit_code == 0, r.output + repr(r.exception)
        assert json.loads(r.stdout.strip().splitlines()[-1])["steps"] >= 1
        log = (run.logs_dir() / f"{stage}.log").read_text()
        assert "run.sharding = \"fsdp\" is dropped" in log and "(accelerate: NO," in log


def test_zero3_full_finetune_with_16_bit_weights_is_refused(gpus, monkeypatch, tmp_path):
    """ZeRO-3 gathers its checkpoint from DeepSpeed's 16-bit working weights: a full fine-tune's update below bf16's
    resolution would be lost between epochs, and so would a LoRA adapter's small updates, so both are refused before
    any work, naming FSDP (and DDP for LoRA). A float32 ZeRO-3 goes ahead."""
    gpus(0)
    for k, v in {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
                 "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "true", "ACCELERATE_MIXED_PRECISION": "bf16",
                 "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    full = config_from_dict({"agent_update": {"lora": False, "learning_rate": 1e-6}}, "t")
    with pytest.raises(ConfigError, match=r"`agent_update.lora` = false under DeepSpeed ZeRO-3 with 16-bit weights.*"
                                          r"learning_rate = 1e-06.*the update is lost.*pipelines/accelerate/"
                                          r"fsdp-full-shard.yaml"):
        check_update_launch(full, "agent_update", "embedded")
    with pytest.raises(ConfigError, match=r"`agent_update.lora` = true under DeepSpeed ZeRO-3 with 16-bit weights.*"
                                          r"rounded to 16 bits.*pipelines/accelerate/ddp.yaml"):
        check_update_launch(Config(), "agent_update", "embedded")                       # LoRA: 16-bit adapters
    lora_fp32 = config_from_dict({"run": {"dtype": "float32"}}, "t")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    assert check_update_launch(lora_fp32, "agent_update", "embedded") == "zero3"         # LoRA in float32 trains
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    with pytest.raises(ConfigError, match="16-bit weights"):       # run.dtype auto: bf16 autocast, bf16 in DeepSpeed
        check_update_launch(full, "agent_update", "embedded")
    fp32 = config_from_dict({"agent_update": {"lora": False}, "run": {"dtype": "float32"}}, "t")
    assert check_update_launch(fp32, "agent_update", "embedded") == "zero3"
    ds = tmp_path / "ds.json"                                      # a DeepSpeed JSON decides for itself
    ds.write_text(json.dumps({"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True},
                              "bf16": {"enabled": True}}))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", str(ds))
    with pytest.raises(ConfigError, match="16-bit weights"):
        check_update_launch(fp32, "agent_update", "embedded")
    monkeypatch.delenv("ACCELERATE_DEEPSPEED_CONFIG_FILE")         # torchrun with run.sharding = "zero3"
    for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_MIXED_PRECISION"):
        monkeypatch.delenv(k)
    torchrun = config_from_dict({"agent_update": {"lora": False}, "run": {"sharding": "zero3"}}, "t")
    with pytest.raises(ConfigError, match="16-bit weights"):
        check_update_launch(torchrun, "agent_update", "embedded")
