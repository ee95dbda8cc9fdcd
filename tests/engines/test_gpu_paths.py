"""What a multi-GPU run depends on, checked on CPU: each rank's device, float32 master weights, sampling settings
vLLM would refuse, the hf engine ignoring a model's own generation_config, the vLLM engine's arguments, seeds,
progress and context limit (against a stand-in `vllm` module), logits for completion positions only, device
synchronisations per micro-step, the warm-up, and one log writer per job."""

import importlib.machinery
import io
import json
import shutil
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from genenv_cli.catalogue.config import Config, config_from_dict, render_config
from genenv_cli.core.errors import ConfigError, ModelError
from genenv_cli.machinery.engines import SamplingParams, open_engine
from genenv_cli.machinery.models import pick_device, resolve
from genenv_cli.rundir import RunDir
from genenv_cli.stages import update_agent
from paths import FIXTURES
from stagekit import agent_pool

FIX = FIXTURES
CONVS = [[{"role": "user", "content": "Weather in Lima?"}],
         [{"role": "user", "content": "Convert 100 USD to EUR and GBP."}],
         [{"role": "user", "content": "Weather in Lima?"}]]   # a duplicate: it must not share the first one's noise


# ---------------------------------------------------------------- 1. each rank on its own device

@pytest.fixture
def four_gpus(monkeypatch):
    """torch.cuda as a machine with 4 GPUs shows it; set_device calls are recorded."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: chosen.append(i))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    return chosen


def test_each_rank_picks_its_local_gpu(four_gpus, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert pick_device("auto") == "cuda:0"
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert pick_device("auto") == "cuda:3" and pick_device("cuda") == "cuda:3"
    assert four_gpus == [0, 3, 3]                     # and made it the current device (for collectives)
    assert pick_device("cpu") == "cpu"
    monkeypatch.setenv("LOCAL_RANK", "4")
    with pytest.raises(ModelError, match=r"LOCAL_RANK=4, but only 4 CUDA device\(s\)"):
        pick_device("auto")


def test_no_gpu_falls_back_to_cpu_unless_cuda_is_demanded(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == "cpu"
    with pytest.raises(ModelError, match="run.device = \"cuda\" but no CUDA device"):
        pick_device("cuda")


def test_policy_and_reference_land_on_the_ranks_device(four_gpus, recorded_loads, monkeypatch, tiny_model):
    """Full fine-tuning with a KL term: the trained model and the separate reference both go to cuda:2 on rank 2
    (before the fix: `to("cuda")`, i.e. cuda:0, for every rank), read straight onto it."""
    from genenv_cli.catalogue.settings import AgentUpdateConfig
    from genenv_cli.machinery.training.policy_loading import load_policy

    moved: dict[int, list[str]] = {}
    real_to = torch.nn.Module.to

    def fake_to(self, *args, **kwargs):  # CPU torch cannot move to CUDA: record where each model was sent
        dev = args[0] if args else kwargs.get("device")
        if isinstance(dev, str | torch.device) and str(dev).startswith("cuda"):
            moved.setdefault(id(self), []).append(str(dev))
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", fake_to)
    monkeypatch.setenv("LOCAL_RANK", "2")
    train = AgentUpdateConfig(lora=False)
    policy = load_policy(str(tiny_model), "t", base_name=str(tiny_model), train=train, need_reference=True,
                         device="auto", dtype="auto", trust_remote_code=False)
    assert policy.reference is not None
    assert moved[id(policy.model)] == ["cuda:2"] and moved[id(policy.reference)] == ["cuda:2"]
    assert [c["device_map"] for c in recorded_loads] == [{"": "cuda:2"}, {"": "cuda:2"}]
    # trained weights are the float32 master copy; the frozen reference uses the compute dtype (bf16 on GPU)
    assert {p.dtype for p in policy.model.parameters()} == {torch.float32}
    assert {p.dtype for p in policy.reference.parameters()} == {torch.bfloat16}


# ---------------------------------------------------------------- 3. float32 master weights

@pytest.mark.slow
def test_full_fine_tuning_step_at_lr_1e6_changes_the_weights(make_run, tiny_model):
    """With bf16 compute (as on a GPU), a step of about 1e-6 must still move the weights: they are kept in float32
    and only the forward/backward runs in bf16 (autocast). Stored in bf16, almost every update would round away."""
    import subprocess

    from safetensors.torch import load_file

    run = RunDir(make_run("agent_update.lora=false", "agent_update.learning_rate=1e-6", "agent_update.kl_coef=0",
                          "agent_update.batch_size=8", "run.dtype=bfloat16"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    # its own process, as a stage runs: bf16 autocast is process-wide accelerate state, kept by later Trainers
    out = subprocess.run([sys.executable, "-m", "genenv_cli", "update-agent", "--epoch", "1", "--run", str(run.root),
                          "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["steps"] == 1
    before = load_file(tiny_model / "model.safetensors")
    after = load_file(run.epoch_dir(1) / "agent" / "model.safetensors")
    assert {t.dtype for t in after.values()} == {torch.float32}           # the checkpoint keeps the master copy
    moved = total = 0
    for name, w in before.items():
        moved += int((after[name] != w).sum())
        total += w.numel()
        if w.dim() == 2 and "layers.0" in name:
            step = (after[name] - w).abs().max().item()
            assert step == pytest.approx(1e-6, rel=0.5)                  # Adam's first step: about lr per weight
    assert moved / total > 0.5, f"only {moved} of {total} weights moved"


def test_checkpoint_is_written_from_the_gathered_state_dict(tiny_model, tmp_path):
    """Under FSDP or ZeRO-3 a rank's module holds only shards (placeholders here): the checkpoint must be the state
    dict accelerate gathers from the wrapped model, saved through the unwrapped one, not the module's own."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from genenv_cli.machinery.models import load_tokenizer
    from genenv_cli.machinery.training.policy_loading import Policy
    from genenv_cli.machinery.training.publishing import gather_state_dict, save_checkpoint

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    gathered = {k: v.clone() + 1.0 for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    wrapped = SimpleNamespace(module=model)
    calls = []

    class Gathering:  # accelerate's Accelerator, as far as the checkpoint uses it
        def get_state_dict(self, m):
            calls.append(m)
            return gathered

        def unwrap_model(self, m):
            return m.module

    trainer = SimpleNamespace(accelerator=Gathering(), model_wrapped=wrapped)
    assert gather_state_dict(None) is None                # nothing trained: nothing wrapped to gather
    state = gather_state_dict(trainer)
    assert calls == [wrapped]
    folder = tmp_path / "agent"
    save_checkpoint(Policy(model=wrapped, tokenizer=load_tokenizer(resolve(str(tiny_model))), lora=False,
                           base_name="b"), folder, role="agent", epoch=1, extra={}, trainer=trainer, state_dict=state)
    saved = load_file(folder / "model.safetensors")
    assert saved and all(torch.equal(v, gathered[k]) for k, v in saved.items())
    assert json.loads((folder / "genenv_checkpoint.json").read_text())["kind"] == "full"


# ---------------------------------------------------------------- 8. settings vLLM refuses

def _cfg(**sections):
    return config_from_dict(sections, "genenv.toml")


@pytest.mark.parametrize("data,match", [
    ({"rollout": {"temperature": 0.0, "group_size": 4}},
     r"`rollout.temperature` = 0 \(greedy\) with `rollout.group_size` = 4"),
    ({"generate": {"temperature": 0.0, "variations": 3}}, r"`generate.temperature` = 0 \(greedy\) with 3 variations"),
    ({"generate": {"temperature": 0.0, "variations": 1, "static_variations": 5}, "env": {"mode": "static"}},
     r"`generate.temperature` = 0 \(greedy\) with 5 variations"),
    ({"rollout": {"temperature": 2.5}}, r"`rollout.temperature` = 2.5 is above its maximum 2.0"),
    ({"generate": {"temperature": 3}}, r"`generate.temperature` = 3.0 is above its maximum 2.0"),
    ({"evaluate": {"temperature": 2.01}}, r"`evaluate.temperature` = 2.01 is above its maximum 2.0"),
    ({"rollout": {"top_p": 0.0}}, r"`rollout.top_p` = 0 keeps no token; allowed values are above 0"),
    ({"generate": {"top_p": 0}}, r"`generate.top_p` = 0 keeps no token"),
    ({"run": {"engine": "vllm"}, "agent_update": {"lora_r": 128}},
     r"`agent_update.lora_r` = 128 is above `vllm.max_lora_rank` = 64"),
    ({"run": {"engine": "vllm"}, "env_update": {"lora_r": 32}, "vllm": {"max_lora_rank": 16}},
     r"`env_update.lora_r` = 32 is above `vllm.max_lora_rank` = 16"),
    ({"vllm": {"max_lora_rank": 100}}, r"`vllm.max_lora_rank` = 100 is not allowed; choose one of 8, 16"),
    ({"vllm": {"gpu_memory_utilization": 1.2}}, r"`vllm.gpu_memory_utilization` = 1.2 is above its maximum 1.0"),
    ({"vllm": {"tensor_parallel_size": 0}}, r"`vllm.tensor_parallel_size` = 0 is below its minimum 1"),
    ({"vllm": {"seeding": "global"}}, r"`vllm.seeding` = 'global' is not allowed; choose one of 'request', 'engine'"),
    ({"agent_update": {"gradient_checkpointing": "yes"}}, r"`agent_update.gradient_checkpointing` must be true or false"),
])
def test_refused_settings_name_the_key(data, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(**data)


def test_the_same_settings_pass_where_they_are_fine():
    _cfg(rollout={"temperature": 0.0, "group_size": 1}, generate={"temperature": 2.0, "top_p": 0.01})
    _cfg(run={"engine": "hf"}, agent_update={"lora_r": 128})             # the hf engine has no rank limit
    _cfg(run={"engine": "vllm"}, agent_update={"lora_r": 128, "lora": False})
    _cfg(run={"engine": "vllm"}, agent_update={"lora_r": 128}, env_update={"lora_r": 128},
         vllm={"max_lora_rank": 128})
    text = render_config(Config())
    assert "[vllm]" in text and "One of: 8, 16, 32, 64, 128, 256, 320, 512." in text
    assert "gradient_checkpointing = false" in text


# ---------------------------------------------------------------- 6. hf engine: the model's generation_config is ignored

def test_generation_config_penalties_are_not_applied_or_recorded(tiny_model, tmp_path):
    """A model whose generation_config asks for a repetition penalty, min-p, top-k and no repeated bigrams (as Hub
    models ship them): the recorded logprobs must still be those of a plain forward pass at the temperature."""
    from transformers import GenerationConfig

    from genenv_cli.machinery.engines.hf import HFEngine

    folder = tmp_path / "penalised"
    shutil.copytree(tiny_model, folder)
    gc = GenerationConfig.from_pretrained(folder)
    gc.do_sample, gc.temperature, gc.top_p = True, 0.3, 0.8          # what Qwen2.5's file looks like, penalties harsher
    gc.repetition_penalty, gc.min_p, gc.top_k, gc.no_repeat_ngram_size = 1.8, 0.2, 5, 2
    gc.save_pretrained(folder)
    engine = HFEngine(resolve(str(folder)), batch_size=4)
    assert engine.dropped_generation_settings["repetition_penalty"] == 1.8
    out = engine.generate(CONVS, SamplingParams(temperature=0.8, max_new_tokens=12, n=2, seed=5))
    worst = 0.0
    for gens in out:
        for g in gens:
            ids = torch.tensor([g.prompt_token_ids + g.token_ids])
            with torch.no_grad():
                logits = engine.model(ids).logits[0, len(g.prompt_token_ids) - 1:-1].float() / 0.8
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(g.token_ids)[:, None]).squeeze(1)
            worst = max(worst, (ref - torch.tensor(g.logprobs)).abs().max().item())
    assert worst < 1e-4


# ---------------------------------------------------------------- the vLLM engine against a stand-in vllm module

class _FakeSamplingParams:
    """vLLM's SamplingParams, as far as genenv uses it, with the checks its _verify_args makes."""

    def __init__(self, n=1, temperature=1.0, top_p=1.0, max_tokens=16, seed=None, logprobs=None):
        if temperature < 0:
            raise ValueError("temperature must be non-negative")
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}.")
        if temperature == 0 and n > 1:
            raise ValueError(f"n must be 1 when using greedy sampling, got {n}.")
        self.n, self.temperature, self.top_p, self.max_tokens = n, temperature, top_p, max_tokens
        self.seed, self.logprobs = seed, logprobs


class _FakeLLM:
    """vllm.LLM: records its arguments; generate() refuses a prompt longer than max_model_len, as vLLM refuses
    the whole batch, and drives `use_tqdm` the way LLM._run_engine does."""

    def __init__(self, model, **kwargs):
        self.kwargs = {"model": model, **kwargs}
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=kwargs.get("max_model_len", 4096)))
        self.events: list[tuple] = []
        self.params = None
        _FakeLLM.last = self

    def generate(self, prompts, sampling_params, *, use_tqdm=True, lora_request=None):
        limit = self.llm_engine.model_config.max_model_len
        for p in prompts:
            if len(p["prompt_token_ids"]) > limit:
                raise ValueError(f"The decoder prompt (length {len(p['prompt_token_ids'])}) is longer than the "
                                 f"maximum model length of {limit}.")
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        self.params = sampling_params
        # vLLM wraps the prompts it renders and adds in a bar too; tqdm's iteration calls update() on it (at once
        # here: mininterval 0), counting prompts, not finished completions
        for _ in use_tqdm(prompts, desc="Rendering prompts", mininterval=0):
            pass
        bar = use_tqdm(total=len(prompts), desc="Processed prompts", dynamic_ncols=True, postfix="")
        outputs = []
        for i, (p, sp) in enumerate(zip(prompts, params, strict=True)):
            comps = [SimpleNamespace(token_ids=[10 + k, 11], text=f"<answer>a{k}</answer>", finish_reason="stop",
                                     logprobs=[{10 + k: SimpleNamespace(logprob=-0.5)}, {11: SimpleNamespace(logprob=-0.25)}])
                     for k in range(sp.n)]
            outputs.append(SimpleNamespace(outputs=comps, prompt_token_ids=p["prompt_token_ids"], finished=True))
            self.events.append(("finished", i))
            _ = bar.format_dict["elapsed"]
            bar.postfix = "est. speed"
            bar.update(sp.n)
        bar.close()
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    vllm.LLM, vllm.SamplingParams = _FakeLLM, _FakeSamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda name, idx, path: SimpleNamespace(name=name, idx=idx, path=path)
    for name, mod in (("vllm", vllm), ("vllm.lora", lora), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    # the CUDA build, whatever vLLM build this machine has installed beside the fake
    monkeypatch.setattr("genenv_cli.machinery.engines.vllm_device", lambda: "cuda")
    return _FakeLLM


def test_vllm_engine_arguments_come_from_the_config(fake_vllm, tiny_model):
    cfg = _cfg(run={"engine": "vllm"}, vllm={"gpu_memory_utilization": 0.6, "max_model_len": 2048,
                                             "tensor_parallel_size": 2, "max_lora_rank": 32})
    engine = open_engine(resolve(str(tiny_model)), engine="vllm", dtype=cfg.run.dtype, seed=7,
                         vllm_settings=cfg.vllm)
    kw = fake_vllm.last.kwargs
    assert kw["dtype"] == "bfloat16"                 # not vLLM's "auto" (float16 for a float32 checkpoint)
    assert (kw["gpu_memory_utilization"], kw["max_model_len"], kw["tensor_parallel_size"], kw["max_lora_rank"]) \
        == (0.6, 2048, 2, 32)
    assert kw["logprobs_mode"] == "processed_logprobs" and kw["generation_config"] == "vllm" and kw["seed"] == 7
    assert not hasattr(engine, "model") and engine.context_limit() == 2048
    open_engine(resolve(str(tiny_model)), engine="vllm", dtype="float32", vllm_settings=Config().vllm)
    assert fake_vllm.last.kwargs["dtype"] == "float32" and "max_model_len" not in fake_vllm.last.kwargs


def test_vllm_engine_gives_every_prompt_its_own_seed_and_reports_progress(fake_vllm, tiny_model):
    from genenv_cli.machinery.engines.vllm import request_seeds

    engine = open_engine(resolve(str(tiny_model)), engine="vllm")
    llm = fake_vllm.last
    out = engine.generate(CONVS, SamplingParams(temperature=0.9, max_new_tokens=8, n=4, seed=100),
                          on_progress=lambda s, t: llm.events.append(("progress", s, t)))
    seeds = [sp.seed for sp in llm.params]
    assert seeds == [100, 104, 108] == request_seeds(100, 3, 4)
    # vLLM seeds child k of a request with seed + k: no two of the 12 samples share a seed
    assert len({s + k for s in seeds for k in range(4)}) == 12
    # progress arrives as each request finishes, while generate() runs; the tokens once at the end
    assert llm.events == [("finished", 0), ("progress", 4, 0), ("finished", 1), ("progress", 4, 0),
                          ("finished", 2), ("progress", 4, 0), ("progress", 0, 24)]
    assert [g.logprobs for g in out[0]][:2] == [[-0.5, -0.25], [-0.5, -0.25]]
    # greedy: one request-level setting, no seed; engine seeding: no per-request seeds
    engine.generate(CONVS[:1], SamplingParams(temperature=0.0, max_new_tokens=8, n=1, seed=3))
    assert not isinstance(llm.params, list) and llm.params.seed is None
    eng2 = open_engine(resolve(str(tiny_model)), engine="vllm", vllm_settings=_cfg(vllm={"seeding": "engine"}).vllm)
    eng2.generate(CONVS, SamplingParams(temperature=0.9, max_new_tokens=8, n=2, seed=3))
    assert fake_vllm.last.params.seed is None


def test_vllm_refuses_an_adapter_above_max_lora_rank(fake_vllm, tiny_model, tmp_path):
    from genenv_cli.machinery.models import ModelRef

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 128}))
    with pytest.raises(ConfigError, match=r"rank 128, above `vllm.max_lora_rank` = 64"):
        open_engine(ModelRef("epochs/0001/agent", str(tiny_model), str(adapter)), engine="vllm")


def test_evaluate_keeps_over_long_prompts_from_vllm(fake_vllm, tiny_model, make_run, tmp_path):
    """evaluate's context guard reads the limit from the engine: with vLLM (no `.model`) it used to read 0 and
    send everything, and vLLM refuses the whole batch when one prompt is too long."""
    from typer.testing import CliRunner

    from genenv_cli.cli import app
    from genenv_cli.machinery.models import load_tokenizer

    run = make_run()
    data = str(FIX / "bamboogle" / "bamboogle.csv")
    runner = CliRunner()
    exported = tmp_path / "inputs.jsonl"
    assert runner.invoke(app, ["evaluate", "--bench", "bamboogle", "--data", data, "--export", str(exported),
                               "--run", str(run)]).exit_code == 0
    tok = load_tokenizer(resolve(str(tiny_model)))
    texts = [tok.apply_chat_template(json.loads(line)["messages"], tokenize=False, add_generation_prompt=True)
             for line in exported.read_text().splitlines()]
    lengths = sorted(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
    assert lengths[2] < lengths[-1]
    new_tokens = 8
    limit = lengths[2] + new_tokens                     # the three longest prompts no longer fit
    r = runner.invoke(app, ["evaluate", "--bench", "bamboogle", "--data", data, "--model", str(tiny_model),
                            "--run", str(run), "--set", "run.engine=vllm", "--set", f"vllm.max_model_len={limit}",
                            "--set", f"evaluate.max_new_tokens={new_tokens}", "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    samples = [json.loads(line) for line in Path(summary["path"].replace(".json", ".samples.jsonl")).read_text()
               .splitlines()]
    too_long = sum(1 for s in samples if s["output"] == "")    # scored as empty answers; the fake answers every prompt
    assert too_long == sum(1 for n in lengths if n > lengths[2]) and 0 < too_long < len(samples)


# ---------------------------------------------------------------- 10. training: logits, synchronisations, warm-up

def test_only_completion_positions_reach_the_lm_head(tiny_model):
    from transformers import AutoModelForCausalLM

    from genenv_cli.machinery.training.logits import completion_logits

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    ids = torch.randint(3, 600, (2, 30), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    seen = []
    hook = model.lm_head.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[1]))
    with torch.no_grad():
        sliced = completion_logits(model, ids, attn, 6)
        full = model(input_ids=ids, attention_mask=attn).logits[:, -7:-1]
    hook.remove()
    assert seen == [6, 30]                               # the 6 positions predicting the completion, against all 30 positions
    assert sliced.shape == (2, 6, model.config.vocab_size) and torch.allclose(sliced, full, atol=1e-5)

    class NoKeep(torch.nn.Module):  # a remote-code model without the argument still works, unsliced
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    with torch.no_grad():
        assert torch.allclose(completion_logits(NoKeep(), ids, attn, 6), full, atol=1e-5)


def _count_syncs(monkeypatch):
    calls = {"n": 0}
    for name in ("item", "tolist"):
        real = getattr(torch.Tensor, name)

        def counted(self, *a, _real=real, **k):
            calls["n"] += 1
            return _real(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def test_micro_steps_do_not_wait_for_the_device(make_run, tiny_model, monkeypatch, tmp_path):
    """Neither GRPO's nor RWR's compute_loss reads anything back: their numbers, the KL the cap decides on included,
    are read once per optimizer step (base_trainer.materialize), when the step's numbers are combined."""
    from genenv_cli.machinery.training import grpo, rwr
    from genenv_cli.machinery.training.base_trainer import materialize
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.machinery.training.rwr_config import RWRConfig
    from genenv_cli.machinery.training.rwr_trainer import RWRTrainer
    from genenv_cli.machinery.training.training_loop import training_arguments

    cfg = Config()
    policy = load_policy(str(tiny_model), "t", base_name=str(tiny_model), train=cfg.agent_update,
                         need_reference=True, device="cpu", dtype="auto", trust_remote_code=False)
    args = training_arguments(tmp_path, cfg.agent_update, seed=0, device="cpu")
    rows = [{"prompt_ids": [5, 6, 7], "completion_ids": [8, 9], "sampler_logps": [-6.0, -6.5], "advantage": 1.0},
            {"prompt_ids": [5, 6], "completion_ids": [9, 10, 11], "sampler_logps": [-6.0, -6.5, -7.0],
             "advantage": -1.0}]
    trainer = GRPOTrainer(policy, args, rows, GRPOConfig(clip_eps=0.2, kl_coef=0.01, loss_type="grpo",
                                                         temperature=1.0, replay_clip=2.0))
    batch = grpo.collate(rows, policy.tokenizer.pad_token_id)
    # the shared-prefix forward reads token ids on the host, and does so only for CPU tensors (no device to wait
    # for; engines/shared_prefix.padded_forward): this CPU stand-in for a device counts every read, so it is off here
    from genenv_cli.machinery.engines import shared_prefix

    monkeypatch.setattr(shared_prefix, "supports", lambda model: False)
    calls = _count_syncs(monkeypatch)
    trainer.compute_loss(policy.model, batch)
    assert calls["n"] == 0
    stats = materialize(trainer.micro)
    assert calls["n"] == 1 and isinstance(stats[0]["kl"], float) and stats[0]["tokens"] == 5.0

    env_rows = [{"prompt_ids": [5, 6, 7], "target_ids": [8, 9], "weight_rel": 1.0}]
    trainer = RWRTrainer(policy, args, env_rows, RWRConfig(kl_coef=0.1, kl_max=100.0))
    batch = rwr.collate(env_rows, policy.tokenizer.pad_token_id)
    calls["n"] = 0
    trainer.compute_loss(policy.model, batch)
    assert calls["n"] == 0
    stats = materialize(trainer.micro)
    assert calls["n"] == 1 and stats[0]["tokens"] == 2.0 and stats[0]["rows"] == 1.0


@pytest.mark.slow
def test_warmup_ratio_becomes_whole_steps(make_run, tiny_model):
    """warmup_ratio 0.5 of 4 steps: 2 warm-up steps whatever transformers' major version makes of warmup_steps."""
    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=2",
                          "agent_update.lr_scheduler=constant_with_warmup", "agent_update.warmup_ratio=0.5"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    update_agent.run(run, run.load_config(), 1)
    from genenv_cli.rundir.datafiles import read_parquet

    steps = read_parquet(run.epoch_dir(1) / "agent_update_steps.parquet", "agent_update_steps")
    # transformers records the rate each step used: 0 and 1/2 during the 2 warm-up steps, then the full rate
    assert steps["learning_rate"].to_list() == pytest.approx([0.0, 0.005, 0.01, 0.01])


# ---------------------------------------------------------------- 10. one log writer and display per job

def test_only_rank_zero_logs_and_shows_progress(tmp_path, monkeypatch):
    from genenv_cli.core.ui import UI

    monkeypatch.setenv("RANK", "1")
    err, out = io.StringIO(), io.StringIO()
    ui = UI(stream=err, out=out, log_path=tmp_path / "stage.log", json_summary=True)
    ui.info("loading")
    with ui.progress("rollout", 2) as bar:
        bar.advance(2)
    ui.summary("rollout", 1, {"n": 2}, "done")
    ui.warn("disk nearly full")
    assert out.getvalue() == "" and not (tmp_path / "stage.log").exists()
    assert err.getvalue() == "[rank 1] warning: disk nearly full\n"
    monkeypatch.setenv("RANK", "0")
    ui = UI(stream=err, out=out, log_path=tmp_path / "stage.log", json_summary=True)
    ui.summary("rollout", 1, {"n": 2}, "done")
    assert json.loads(out.getvalue())["n"] == 2 and (tmp_path / "stage.log").exists()


# ---------------------------------------------------------------- checkpoints: the digest of gathered weights

def test_digest_reads_gathered_values_under_activation_checkpointing_wrappers(tiny_model):
    """FSDP's activation checkpointing wraps each decoder layer, so parameter names carry
    `_checkpoint_wrapped_module.` while the gathered state dict does not: the digest must still read every value from
    the gathered state dict (before: no name matched, and rank 0 hashed its own shards), and equal the digest of the
    plain model holding those values, as it loads back."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from transformers import AutoModelForCausalLM

    from genenv_cli.machinery.training.publishing import parameter_digest

    wrapped = AutoModelForCausalLM.from_pretrained(tiny_model)
    layer = type(wrapped.model.layers[0])
    apply_activation_checkpointing(wrapped, checkpoint_wrapper_fn=checkpoint_wrapper,
                                   check_fn=lambda m: isinstance(m, layer))
    assert any("_checkpoint_wrapped_module." in n for n, _ in wrapped.named_parameters())
    gathered = {k: v.clone() + 1.0 for k, v in wrapped.state_dict().items()}
    assert not any("_checkpoint_wrapped_module." in k for k in gathered)       # the state dict drops the prefix
    plain = AutoModelForCausalLM.from_pretrained(tiny_model)
    plain.load_state_dict(gathered)
    assert parameter_digest(wrapped, gathered) == parameter_digest(plain)
    assert parameter_digest(wrapped, gathered) != parameter_digest(wrapped)    # the gathered values, not the local

    class Shard(torch.nn.Parameter):  # a DTensor's stand-in: this rank's part of a sharded parameter
        def to_local(self):
            return self

    sharded = torch.nn.Module()
    sharded.w = Shard(torch.ones(2))
    with pytest.raises(RuntimeError, match="no value for the sharded parameter w"):
        parameter_digest(sharded, {"other": torch.zeros(2)})


# ---------------------------------------------------------------- host memory: weights go straight to the GPU

@pytest.fixture
def recorded_loads(monkeypatch, tiny_model):
    """from_pretrained calls recorded with their keyword arguments (the model comes back on the CPU, which CPU torch
    cannot leave), and Module.to("cuda:...") a no-op that records where each model was sent."""
    from transformers import AutoModelForCausalLM

    calls: list[dict] = []
    real = AutoModelForCausalLM.from_pretrained.__func__

    def recording(cls, path, *args, **kwargs):
        calls.append({"path": str(path), **kwargs})
        kwargs.pop("device_map", None)
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(recording))
    real_to = torch.nn.Module.to

    def fake_to(self, *args, **kwargs):
        dev = args[0] if args else kwargs.get("device")
        if isinstance(dev, str | torch.device) and str(dev).startswith("cuda"):
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", fake_to)
    return calls


def test_models_are_read_straight_onto_the_ranks_gpu(four_gpus, recorded_loads, monkeypatch, tiny_model):
    """Every model a GPU process loads is read onto its GPU tensor by tensor (device_map), not built in host memory
    first: that cost a float32 7B copy (30 GB) per training rank before."""
    from genenv_cli.machinery.models import load_model

    monkeypatch.setenv("LOCAL_RANK", "2")
    load_model(resolve(str(tiny_model)), device="auto", dtype="float32")
    assert recorded_loads[-1]["device_map"] == {"": "cuda:2"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    load_model(resolve(str(tiny_model)), device="auto", dtype="float32")
    assert "device_map" not in recorded_loads[-1]                    # CPU: as before


def test_under_fsdp_every_rank_reads_the_trained_weights(four_gpus, recorded_loads, monkeypatch, tiny_model):
    """Full fine-tuning sharded by FSDP over several GPUs: rank 1 reads the trained weights (float32) and its frozen
    reference (compute dtype) onto its own GPU exactly as rank 0 does. No rank builds the model on the meta device:
    accelerate's FSDP2 preparation finds each optimizer slot's shard by the old parameter's address, and every meta
    parameter's address is 0 (all of rank 1's slots landed on one parameter)."""
    from genenv_cli.catalogue.settings import AgentUpdateConfig
    from genenv_cli.machinery.training.policy_loading import load_policy

    train = AgentUpdateConfig(lora=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true")
    for rank in (1, 0):
        recorded_loads.clear()
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        policy = load_policy(str(tiny_model), "t", base_name=str(tiny_model), train=train, need_reference=True,
                             device="auto", dtype="auto", trust_remote_code=False)
        assert all(p.device.type != "meta" for p in policy.model.parameters())
        assert len({p.data_ptr() for p in policy.model.parameters()}) == len(list(policy.model.parameters()))
        assert [(c["dtype"], c["device_map"]) for c in recorded_loads] == [(torch.float32, {"": f"cuda:{rank}"}),
                                                                          (torch.bfloat16, {"": f"cuda:{rank}"})]


# ---------------------------------------------------------------- memory: a warning when the plan exceeds the GPU

def test_an_update_the_plan_says_cannot_fit_is_warned_about_naming_the_setting():
    """LoRA at 7B with the settings' defaults (gradient checkpointing off) at the preset's lengths: the plan is far
    past an 80 GB GPU, and the warning names the setting that brings it under."""
    from genenv_cli.catalogue.settings import AgentUpdateConfig, EnvUpdateConfig
    from genenv_cli.core.memory_plan import QWEN25
    from genenv_cli.machinery.launch import memory_warning

    seven = QWEN25["7B"]
    said = memory_warning("agent_update", AgentUpdateConfig(), seven, "lora", 1, (9000, 1024), reference=False,
                          loss="grpo", device_total=int(80e9))
    assert said.startswith("memory_plan predicts 287 GB per GPU for this update (lora, 8 sequences of up to 9,000 "
                           "tokens per micro-step, gradient checkpointing off), more than this GPU's 80 GB")
    assert "Set agent_update.gradient_checkpointing = true (predicted 42 GB)" in said
    assert memory_warning("agent_update", AgentUpdateConfig(gradient_checkpointing=True), seven, "lora", 1,
                          (9000, 1024), reference=False, loss="grpo", device_total=int(80e9)) is None
    big = memory_warning("env_update", EnvUpdateConfig(gradient_checkpointing=True, batch_size=64), seven, "lora", 1,
                         (4608, 2560), reference=False, loss="rwr", device_total=int(80e9))
    assert "Lower env_update.batch_size" in big and "env_update.grad_accum" in big
