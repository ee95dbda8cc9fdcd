"""`genenv export`: a trained checkpoint as a standalone transformers folder that generates what the run's own engine
generates from the checkpoint, greedy token for token; the adapter alone with its base named portably; and the
refusals (an untrained epoch, a pruned or changed checkpoint, an existing folder) that leave nothing behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from stagekit import agent_pool, env_pool

runner = CliRunner()
PROMPTS = [[{"role": "user", "content": f"Compute {a} + {b}"}] for a, b in [(1, 2), (3, 4), (12, 30), (7, 7)]]


@pytest.fixture
def trained(make_run, tiny_model) -> RunDir:
    """Epoch 1 with both updates done on the tiny model: a LoRA agent and environment that moved off the base."""
    from genenv_cli.stages import update_agent, update_env

    run = RunDir(make_run("agent_update.learning_rate=0.05", "env_update.learning_rate=0.05", "env_update.kl_max=100",
                          "rollout.temperature=0.8", "rollout.top_p=0.9", "rollout.max_new_tokens=10"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 0.0, 0.0]})
    env_pool(run, 1, [1.0, 0.9], [True, True])
    cfg = run.load_config()
    update_agent.run(run, cfg, 1)
    update_env.run(run, cfg, 1)
    return run


def _engine_tokens(model_dir: Path) -> list[list[int]]:
    """Greedy tokens of the run's own engine (genenv's hf engine) on a folder genenv resolves."""
    from genenv_cli.machinery.engines.base import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    engine = HFEngine(resolve(str(model_dir)), device="cpu", dtype="float32")
    outs = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=12))
    return [o[0].token_ids for o in outs]


def _transformers_tokens(model: object, tokenizer: object) -> list[list[int]]:
    """Greedy tokens of plain transformers `generate`, one prompt at a time (no padding), up to the end of turn."""
    import torch

    out = []
    for messages in PROMPTS:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12)
        out.append(gen[0, ids.shape[1]:].tolist())
    return out


def _strip_eos(tokens: list[int], eos: int) -> list[int]:
    return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens


@pytest.mark.slow
def test_merged_export_loads_with_transformers_and_generates_as_the_run_does(trained, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    out = tmp_path / "exported"
    result = runner.invoke(app, ["export", "--run", str(trained.root), "--epoch", "1", "--model", "agent", "--out",
                                 str(out), "--run-sampling"])
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "README.md", "tokenizer_config.json"} <= names
    assert "adapter_config.json" not in names  # merged: a standalone model
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template and str(model.dtype) == "torch.float32"
    # the run's sampling: rollout's temperature and top-p, no top-k (transformers would apply 50), its length
    gen = GenerationConfig.from_pretrained(out)
    assert (gen.do_sample, gen.temperature, gen.top_p, gen.top_k, gen.max_new_tokens) == (True, 0.8, 0.9, 0, 10)
    ours = _engine_tokens(trained.checkpoint_dir(1, "agent"))
    theirs = _transformers_tokens(model, tokenizer)
    eos = tokenizer.eos_token_id
    assert [_strip_eos(t, eos) for t in theirs] == [_strip_eos(t, eos) for t in ours]
    assert any(len(t) > 3 for t in ours)
    # the export is the trained agent, not the base: the merged weights moved
    base = AutoModelForCausalLM.from_pretrained(trained.load_config().agent.model)
    name = next(n for n, _ in base.named_parameters() if "q_proj" in n)
    assert not bool((dict(model.named_parameters())[name] - dict(base.named_parameters())[name]).abs().max() == 0)
    card = (out / "README.md").read_text()
    assert "epoch 1" in card and "GRPO" in card and "learning_rate = 0.05" in card and "temperature 0.8" in card


@pytest.mark.slow
def test_by_default_the_export_keeps_the_models_own_generation_defaults(trained, tmp_path):
    """The run's rollout.max_new_tokens (10 here) is a training setting: a served export must not answer in at most
    that many tokens unless asked (--run-sampling)."""
    from transformers import GenerationConfig

    for merge in ("--merge", "--no-merge"):
        out = tmp_path / f"default{merge}"
        result = runner.invoke(app, ["export", "--run", str(trained.root), "--epoch", "1", "--out", str(out), merge])
        assert result.exit_code == 0, result.output
        gen = GenerationConfig.from_pretrained(out)
        assert gen.max_new_tokens != 10 and gen.top_p != 0.9 and gen.top_k != 0, gen
        card = (out / "README.md").read_text()
        assert "the base model's own defaults" in card and "temperature 0.8" in card and "--run-sampling" in card


@pytest.mark.slow
def test_the_adapter_export_names_its_base_portably(trained, tmp_path):
    """--no-merge: the adapter files with `base_model_name_or_path` naming the base by folder name and the sha256 of
    its weights (never this machine's path); PEFT loads it on that base, genenv loads the folder by itself, and both
    generate what the run's engine does."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv_cli.actions.export import weights_digest

    out = tmp_path / "adapter"
    result = runner.invoke(app, ["export", "--run", str(trained.root), "--epoch", "1", "--out", str(out), "--no-merge"])
    assert result.exit_code == 0, result.output
    base_dir = Path(trained.load_config().agent.model)
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == f"{base_dir.name}@sha256:{weights_digest(base_dir)}"
    assert str(tmp_path) not in (out / "adapter_config.json").read_text()
    assert "model.safetensors" not in {p.name for p in out.iterdir()}
    assert weights_digest(base_dir) in (out / "README.md").read_text()
    ours = _engine_tokens(trained.checkpoint_dir(1, "agent"))
    peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    eos = tokenizer.eos_token_id
    assert [_strip_eos(t, eos) for t in _transformers_tokens(peft, tokenizer)] == [_strip_eos(t, eos) for t in ours]
    assert _engine_tokens(out) == ours  # genenv itself loads the export on its base


@pytest.mark.slow
def test_the_environment_exports_with_its_own_sampling(trained, tmp_path):
    from transformers import GenerationConfig

    out = tmp_path / "env"
    result = runner.invoke(app, ["export", "--run", str(trained.root), "--epoch", "1", "--model", "env", "--out",
                                 str(out), "--dtype", "bfloat16", "--run-sampling"])
    assert result.exit_code == 0, result.output
    cfg = trained.load_config()
    gen = GenerationConfig.from_pretrained(out)
    assert (gen.temperature, gen.top_p, gen.max_new_tokens) == (cfg.generate.temperature, cfg.generate.top_p,
                                                                 cfg.generate.max_new_tokens)
    config = json.loads((out / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"  # transformers 4 names it torch_dtype
    assert "environment" in (out / "README.md").read_text()


@pytest.mark.slow
def test_refusals_leave_nothing_behind(trained, tmp_path):
    run = trained
    out = tmp_path / "x"

    def export(*args: str) -> object:
        return runner.invoke(app, ["export", "--run", str(run.root), "--out", str(out), *args])

    r = export("--epoch", "2")
    assert r.exit_code == 2 and "update-agent` of epoch 2" in r.output
    r = export("--epoch", "1", "--model", "critic")
    assert r.exit_code == 2 and "expected agent or env" in r.output
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    r = export("--epoch", "1")
    assert r.exit_code == 2 and "exists" in r.output and "--force" in r.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    # a changed checkpoint is not exported as if it were the trained one
    folder = run.checkpoint_dir(1, "agent")
    saved = tmp_path / "saved-agent"
    shutil.copytree(folder, saved)
    (folder / "adapter_model.safetensors").write_bytes(b"damaged")
    r = export("--epoch", "1", "--force")
    assert r.exit_code == 2 and "not what `update-agent --epoch 1` wrote" in r.output
    # a pruned one is named as pruned
    shutil.rmtree(folder)
    (run.epoch_dir(1) / "pruned.json").write_text(json.dumps({run.rel(folder): {"fingerprint": {}, "pruned": "2026-11-26"}}))
    r = export("--epoch", "1", "--force")
    assert r.exit_code == 2 and "deleted by run.keep_checkpoints" in r.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x.")]  # no temporary folder left
    # restored, --force replaces the folder whole
    (run.epoch_dir(1) / "pruned.json").unlink()
    shutil.copytree(saved, folder)
    shutil.copystat(saved, folder)
    r = export("--epoch", "1", "--force")
    assert r.exit_code == 0, r.output
    assert "mine.txt" not in {p.name for p in out.iterdir()} and (out / "config.json").is_file()


def test_an_untrained_role_has_nothing_to_export():
    from genenv_cli.actions.export import checkpoint_folder
    from genenv_cli.catalogue.config import Config
    from genenv_cli.core.errors import ConfigError

    cfg = Config()
    cfg.agent.mode = "frozen"
    with pytest.raises(ConfigError, match="agent is never trained"):
        checkpoint_folder(None, cfg, 1, "agent")
    cfg.env.mode = "seeds"
    with pytest.raises(ConfigError, match="environment is never trained"):
        checkpoint_folder(None, cfg, 1, "env")


@pytest.mark.slow
def test_a_full_fine_tune_exports_its_weights(make_run, tiny_model, tmp_path):
    """Full weights (agent_update.lora = false) are exported as they are, with --no-merge too (said in a note)."""
    from transformers import AutoModelForCausalLM

    from genenv_cli.stages import update_agent

    run = RunDir(make_run("agent_update.lora=false", "agent_update.learning_rate=0.01"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0]})
    update_agent.run(run, run.load_config(), 1)
    out = tmp_path / "full"
    r = runner.invoke(app, ["export", "--run", str(run.root), "--epoch", "1", "--out", str(out), "--no-merge"])
    assert r.exit_code == 0, r.output
    assert "holds full weights, not an adapter" in r.output
    model = AutoModelForCausalLM.from_pretrained(out)
    saved = AutoModelForCausalLM.from_pretrained(run.checkpoint_dir(1, "agent"))
    assert all(bool((a == b).all()) for a, b in zip(model.parameters(), saved.parameters(), strict=True))
    assert "full weights" in (out / "README.md").read_text()
