"""What only a CUDA GPU can show, run by benchmarks/gpu/check.py on a GPU machine (`pytest -m gpu`) and skipped
everywhere else: models read straight onto the GPU without a host copy, the hf engine's per-sample seeds in CUDA's
generators, update-env's chunked loss against the whole-vocabulary one in GPU memory, and both update stages in
bf16 on the GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _anon_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("RssAnon:"))


def _peak_anon_during(fn) -> int:
    """The peak of this process's anonymous memory while `fn` runs, above where it started, in bytes."""
    start = peak = _anon_kb()
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.wait(0.005):
            peak = max(peak, _anon_kb())

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        done.set()
        t.join()
    return (max(peak, _anon_kb()) - start) * 1024


def test_weights_are_read_onto_the_gpu_without_a_host_copy(tmp_path):
    """A 160M-parameter model saved in bf16, loaded in float32 for training: read onto the GPU tensor by tensor, the
    process's own host memory grows by a fraction of the model; built on the CPU first, by the whole float32 model."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    from genenv_cli.machinery.models import ModelRef, load_model

    cfg = Qwen2Config(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=2, vocab_size=32000, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    size = sum(p.numel() for p in model.parameters()) * 4
    model.to(torch.bfloat16).save_pretrained(tmp_path / "m")
    del model
    torch.zeros(1, device="cuda")  # CUDA's own start-up is not what is measured
    ref = ModelRef("m", str(tmp_path / "m"))
    direct = _peak_anon_during(lambda: load_model(ref, device="cuda", dtype="float32"))
    torch.cuda.empty_cache()
    via_cpu = _peak_anon_during(lambda: AutoModelForCausalLM.from_pretrained(tmp_path / "m", dtype=torch.float32)
                                .to("cuda"))
    assert via_cpu > 0.8 * size
    assert direct < 0.5 * size, (direct, via_cpu, size)


def test_hf_engine_samples_draw_the_same_alone_or_batched_on_the_gpu(tiny_model):
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    engine = HFEngine(resolve(str(tiny_model)), device="cuda", dtype="float32", batch_size=8)
    assert engine.device.type == "cuda"
    convs = [[{"role": "user", "content": f"Compute {a} + {b}"}] for a, b in [(1, 2), (3, 4), (1, 2)]]
    p = SamplingParams(temperature=1.0, max_new_tokens=12, n=3, seed=5)
    whole = engine.generate(convs, p)
    for i in range(3):
        alone = engine.generate(convs[i:i + 1], p, seeds=[p.seed + i * p.n])
        assert [g.token_ids for g in alone[0]] == [g.token_ids for g in whole[i]]


def test_update_env_loss_in_chunks_holds_a_fraction_of_the_whole_vocabulary_one_on_the_gpu():
    """bf16 logits as autocast gives them, 4 x 512 positions of Qwen's vocabulary: the same values, and the peak GPU
    memory of the forward and backward pass a fraction of the whole-vocabulary loss's."""
    from genenv_cli.machinery.training.rwr import rwr_loss
    from reference_losses import whole_vocabulary

    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (4, 512, 151936)

    def inputs():
        logits = (torch.randn(shape, generator=g, device="cuda") * 2).to(torch.bfloat16).requires_grad_()
        ref = (torch.randn(shape, generator=g, device="cuda") * 2).to(torch.bfloat16)
        targets = torch.randint(0, shape[-1], shape[:2], generator=g, device="cuda")
        mask = torch.ones(shape[:2], device="cuda")
        return logits, ref, targets, mask, torch.ones(shape[0], device="cuda")

    peaks, values = [], []
    for fn in (whole_vocabulary, rwr_loss):
        g.manual_seed(0)
        args = inputs()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn(*args, kl_coef=0.1)
        out[0].backward()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
        values.append([float(x) for x in out])
        del args, out
        torch.cuda.empty_cache()
    assert values[0] == pytest.approx(values[1], rel=1e-5)
    assert peaks[1] < peaks[0] / 3, peaks


def test_both_updates_train_in_bf16_on_the_gpu(make_run, tiny_model):
    """update-agent (full fine-tuning at lr 1e-6: float32 master weights move under bf16 autocast) and update-env
    (LoRA, the chunked KL) as the CLI runs them, on the GPU, with the dtypes of the precision story (float32 weights
    and gradients, bf16 compute); the checkpoint loads back with the recorded digest."""
    from transformers import AutoModelForCausalLM

    from genenv_cli.machinery.training.publishing import parameter_digest
    from genenv_cli.rundir import RunDir
    from stagekit import agent_pool, env_pool

    run = RunDir(make_run("agent_update.lora=false", "agent_update.learning_rate=1e-6", "agent_update.batch_size=4",
                          "env_update.kl_max=100", "env_update.learning_rate=0.001", "run.device=cuda"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    env_pool(run, 1, [1.0, 0.9], [True, True])
    for stage in ("update-agent", "update-env"):
        out = subprocess.run([sys.executable, "-m", "genenv_cli", stage, "--epoch", "1", "--run", str(run.root),
                              "--json"], capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout.strip().splitlines()[-1])["steps"] >= 1
        manifest = json.loads(run.manifest_path(1, stage).read_text())   # the precision story (docs/gpus.md)
        assert manifest["counts"]["precision"] == {"weights": "float32", "compute": "bfloat16", "grads": "float32",
                                                   "reduce": None}
    saved = AutoModelForCausalLM.from_pretrained(run.epoch_dir(1) / "agent", dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    assert any(not torch.equal(a, b) for a, b in zip(saved.state_dict().values(), base.state_dict().values(),
                                                     strict=True))
    meta = json.loads((run.epoch_dir(1) / "agent" / "genenv_checkpoint.json").read_text())
    assert parameter_digest(saved) == meta["parameter_digest"]
