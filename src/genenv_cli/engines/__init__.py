"""Text generation engines: `hf` (transformers, CPU or GPU) and `vllm` (GPU, optional extra).

Both are imported only when a command needs them, so `genenv --help` stays light.
"""

from __future__ import annotations

import importlib.util

from genenv_cli.engines.base import Engine, Generation, SamplingParams
from genenv_cli.errors import ConfigError

__all__ = ["Engine", "Generation", "SamplingParams", "choose_engine", "open_engine"]


def choose_engine(name: str, device: str) -> str:
    """`auto`: vLLM when it is installed and a GPU is present, else transformers."""
    if name != "auto":
        return name
    if device == "cpu" or importlib.util.find_spec("vllm") is None:
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


def open_engine(ref, *, engine: str = "auto", device: str = "auto", dtype: str = "auto",
                trust_remote_code: bool = False, batch_size: int = 32, seed: int = 0, vllm_settings=None) -> Engine:
    """An engine serving the model `ref` (a models.ModelRef); `vllm_settings` is the config's [vllm] section."""
    kind = choose_engine(engine, device)
    if kind == "hf":
        from genenv_cli.engines.hf import HFEngine

        return HFEngine(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code, batch_size=batch_size)
    if kind == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("run.engine = \"vllm\" but vLLM is not installed: pip install 'genenv-cli[vllm]' "
                              "(CUDA machines only), or set run.engine = \"hf\".")
        from genenv_cli.config import VLLMConfig
        from genenv_cli.engines.vllm import VLLMEngine
        from genenv_cli.models import dtype_name

        v = vllm_settings or VLLMConfig()
        return VLLMEngine(ref, dtype=dtype_name(dtype, "cuda"), trust_remote_code=trust_remote_code, seed=seed,
                          max_lora_rank=v.max_lora_rank, gpu_memory_utilization=v.gpu_memory_utilization,
                          max_model_len=v.max_model_len, tensor_parallel_size=v.tensor_parallel_size,
                          seeding=v.seeding)
    raise ConfigError(f"unknown engine {kind!r}; choose auto, hf or vllm.")
