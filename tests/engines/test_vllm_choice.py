"""Which engine `run.engine = "auto"` picks, and what vLLM is given, for each installed vLLM build and device
(no vLLM needed: the installed build is stubbed)."""

from __future__ import annotations

import pytest
import torch

import genenv_cli.machinery.engines as engines
from genenv_cli.core.errors import ConfigError
from genenv_cli.machinery.engines import choose_engine, vllm_dtype, vllm_memory_share


@pytest.fixture
def installed(monkeypatch):
    """installed(build, gpu): vLLM's `build` ("cpu", "cuda" or None) is installed; a GPU is visible or not."""
    monkeypatch.delenv("GENENV_AUTO_ENGINE", raising=False)

    def set_(build, gpu):
        monkeypatch.setattr(engines, "vllm_device", lambda: build)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)

    return set_


@pytest.mark.parametrize("build,gpu,device,expected", [
    (None, False, "auto", "hf"), (None, True, "auto", "hf"),
    # the CPU build: only when asked for (run.engine = "vllm"); auto stays on transformers
    ("cpu", False, "auto", "hf"), ("cpu", False, "cpu", "hf"), ("cpu", True, "cpu", "hf"),
    ("cpu", True, "auto", "hf"), ("cpu", True, "cuda", "hf"),
    # the CUDA build: only where a GPU is
    ("cuda", True, "auto", "vllm"), ("cuda", True, "cuda:1", "vllm"), ("cuda", False, "auto", "hf"),
    ("cuda", True, "cpu", "hf"),
])
def test_auto_takes_vllm_where_a_gpu_is(installed, build, gpu, device, expected):
    installed(build, gpu)
    assert choose_engine("auto", device) == expected
    assert choose_engine("hf", device) == "hf" and choose_engine("vllm", device) == "vllm"


def test_the_environment_can_hold_auto_to_one_engine(installed, monkeypatch):
    installed("cuda", True)
    monkeypatch.setenv("GENENV_AUTO_ENGINE", "hf")
    assert choose_engine("auto", "cuda") == "hf"
    assert choose_engine("vllm", "cpu") == "vllm"  # an explicit choice stands
    monkeypatch.setenv("GENENV_AUTO_ENGINE", "sglang")
    with pytest.raises(ConfigError, match="GENENV_AUTO_ENGINE='sglang': expected an engine's name, one of hf, vllm"):
        choose_engine("auto", "cpu")


def test_vllm_gets_the_dtype_of_the_device_it_runs_on(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    # CPU: the trainer's float32, not the float16 the GPU rule gives where bf16 is missing
    assert vllm_dtype("auto", "cpu") == "float32"
    assert vllm_dtype("auto", "cuda") == "float16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert vllm_dtype("auto", "cuda") == "bfloat16"
    assert vllm_dtype("bfloat16", "cpu") == "bfloat16"


def test_the_memory_share_is_the_setting_or_the_platforms_default():
    assert vllm_memory_share(0.3, "cpu") == 0.3 and vllm_memory_share(0.3, "cuda") == 0.3
    assert vllm_memory_share(0.0, "cuda") == 0.9


def test_a_cuda_device_with_the_cpu_build_is_refused(installed, tiny_model):
    from genenv_cli.machinery.engines import open_engine
    from genenv_cli.machinery.models import resolve

    installed("cpu", True)
    with pytest.raises(ConfigError, match="the installed vLLM is its CPU build"):
        open_engine(resolve(str(tiny_model)), engine="vllm", device="cuda")
    installed(None, False)
    with pytest.raises(ConfigError, match="vLLM is not installed"):
        open_engine(resolve(str(tiny_model)), engine="vllm")
