"""How much GPU memory an update and a vLLM engine need, per GPU: the numbers behind docs/gpus.md's table and the
refusal of a full fine-tune that cannot fit.

Written here because no library we use estimates it for our setup (accelerate's `estimate-memory` counts weights,
gradients and Adam states of one model, but not our float32-master layout, the frozen reference model, the
activations of a GRPO batch or vLLM's KV cache). The formulas, in bytes, with P parameters and N GPUs:

- LoRA: the frozen base in the compute dtype (2 P), whole on every GPU; the adapter with its gradient and AdamW's
  two moments in float32 (16 bytes per adapter parameter); the reference is the base with the adapter off (free).
- Full fine-tuning, our layout: float32 weights that AdamW updates (4 P; they are the master copy), float32
  gradients (4 P), AdamW's two moments (8 P): 16 P. Unsharded (`none`) every GPU holds all of it; FSDP divides it
  by N and adds one decoder layer gathered in float32 at a time (twice: the one computing, the one prefetched).
- Full fine-tuning under ZeRO-3 (bf16 on): 16-bit weights (2 P) and gradients (2 P) plus float32 master weights
  (4 P) and AdamW's moments (8 P): 16 P, divided by N, plus the gathered layers.
- The reference model for the KL term (`kl_coef > 0`) in the compute dtype (2 P), whole on every GPU.
- Activations, an estimate: with gradient checkpointing each layer keeps its input (2 bytes x hidden per token) and
  one layer is recomputed at a time (about 34 bytes x hidden per token, attention without a seq^2 term as with SDPA);
  without it every layer keeps its 34 x hidden. Plus the loss's own tensors (`loss_bytes`). Both losses take the
  last hidden states of the completion (target) positions and apply the LM head a chunk of positions at a time
  inside the loss (training/head_loss.py), so no (batch x positions x vocabulary) tensor exists: what stays is the
  hidden states as they reach the loss (float32 under accelerate's output conversion, the compute dtype under FSDP2,
  which leaves the outputs in its parameter dtype), their gradient and its cast (update-env: the reference's hidden
  states too), one chunk's float32 temporaries (LOSS_TEMPORARIES x 4 bytes x LOSS_CHUNK_ELEMENTS) and its logits in
  the compute dtype, and where the head trains (full fine-tuning) its weight cast to the compute dtype and its
  float32 gradient accumulator (2 + 4 bytes x vocab x hidden). DeepSpeed ZeRO-3 gathers a module's weight only while
  that module runs, so there the losses take the logits (the `logits` route): per target token the logits (4 bytes
  x vocab in float32), update-env's reference's (4), the float32 gradient (4) and its cast to the compute dtype;
  about 14 bytes x vocab per target token for update-env (12.6 measured on an H200): 44 GB at 8 x 2,560 target
  tokens of the 7B vocabulary, against 2 GB with the head inside the loss.
- What the allocator reserves beyond what is allocated: the caching allocator keeps freed blocks for reuse and
  splits them, so its reserved peak is above the allocated one. On an H200 without `expandable_segments` the gap
  was 0.13-0.96 times the planned activations (benchmarks/gpu/, 0.5B shape); the training stages set
  `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (unless the user set that variable), which maps freed memory
  back into one segment. The plan adds ALLOCATOR_SLACK times the activations: an estimate the GPU check measures.
  The update's warning compares the plan with what the allocator can reserve on the GPU (free memory plus what this
  process already reserves), not with the GPU's total.
- FSDP2 keeps the root module's parameters (embedding, final norm, head) gathered from the forward pass to the end
  of the backward pass, with their unsharded gradients: counted, in float32 like the gathered layers.
- vLLM: the weights in the compute dtype (2 P, divided over `tensor_parallel_size`) plus the KV cache of a batch
  of full-length sequences: 2 (K and V) x layers x kv_heads x head_dim x 2 bytes per token.
- Host memory per machine: every model is read straight onto its GPU (models.load_model), so no process holds
  weights in host memory; each holds its libraries and CUDA context (PROCESS_HOST_BYTES, an estimate) and, in
  transit, the largest tensor converted to float32 (the embedding: 4 x vocab x hidden). The checkpoint being read
  sits in the page cache, shared by the processes and given back under pressure (2 P for the bf16 base, 4 P for a
  float32 full fine-tuning checkpoint). Read onto the CPU first instead, each training process would hold its float32
  copy (4 P) and its reference (2 P): 245 GB plus 15 GB per reference for 8 ranks at 7B.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace

GB = 1e9
# both updates' losses work through the target positions in chunks of at most this many (position x vocabulary)
# elements, a few float32 tensors of that size alive at once (training/target_logps.py, training/rwr.py)
LOSS_CHUNK_ELEMENTS = 2**25
LOSS_TEMPORARIES = 6
# reserved beyond allocated, as a share of the activations (module docstring): with expandable_segments (the
# training stages' default) an estimate; without it the largest share an H200 showed (0.96 for update-agent LoRA)
ALLOCATOR_SLACK = {True: 0.1, False: 1.0}
# a training or generation process's own host memory on a GPU machine (Python, torch, CUDA's context and libraries,
# the pool's rows): an estimate, about 0.5 GB of it measured on CPU; benchmarks/gpu/ records the real one
PROCESS_HOST_BYTES = 3e9


# torch's allocator settings: the CUDA-only name and the newer one for every device (either set: the user's choice)
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
EXPANDABLE = "expandable_segments:True"


def expandable_segments_on(environ: dict[str, str] | None = None) -> bool:
    """Whether this process's CUDA allocator maps freed memory back into one segment: its setting asks for it, or no
    setting is made and the training stages set it (`default_allocator`).

    >>> expandable_segments_on({}), expandable_segments_on({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"})
    (True, False)
    """
    env = os.environ if environ is None else environ
    given = [env[name] for name in ALLOC_CONF_VARS if name in env]
    if not given:
        return True
    return any("expandable_segments:true" in value.replace(" ", "").lower() for value in given)


def default_allocator(environ: dict[str, str] | None = None) -> bool:
    """Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for this process (and those it starts) unless the user set
    an allocator setting; True when it did. Without it the caching allocator's reserved peak was up to twice the
    allocated one (module docstring). torch reads the setting when CUDA initialises, so a training stage calls this
    first; once CUDA is up it is too late and nothing is set."""
    env = os.environ if environ is None else environ
    if any(name in env for name in ALLOC_CONF_VARS):
        return False
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return False
    env["PYTORCH_CUDA_ALLOC_CONF"] = EXPANDABLE
    return True


@dataclass(frozen=True)
class Shape:
    """What the formulas need of a decoder-only model (the fields of its config.json)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def layer_params(self) -> int:
        kv = self.kv_heads * self.head_dim
        attn = self.hidden * self.hidden + self.hidden + 2 * (self.hidden * kv + kv) + self.hidden * self.hidden
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden

    def params(self) -> int:
        embed = self.vocab * self.hidden
        return self.layers * self.layer_params() + embed * (1 if self.tied else 2) + self.hidden

    def lora_params(self, r: int, targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")) -> int:
        kv = self.kv_heads * self.head_dim
        dims = {"q_proj": (self.hidden, self.hidden), "k_proj": (self.hidden, kv), "v_proj": (self.hidden, kv),
                "o_proj": (self.hidden, self.hidden), "gate_proj": (self.hidden, self.intermediate),
                "up_proj": (self.hidden, self.intermediate), "down_proj": (self.intermediate, self.hidden)}
        return self.layers * sum(r * (dims[t][0] + dims[t][1]) for t in targets if t in dims)


# Qwen2.5 Instruct models, from their config.json
QWEN25 = {
    "0.5B": Shape("Qwen/Qwen2.5-0.5B-Instruct", 896, 24, 14, 2, 4864, 151936, True),
    "1.5B": Shape("Qwen/Qwen2.5-1.5B-Instruct", 1536, 28, 12, 2, 8960, 151936, True),
    "7B": Shape("Qwen/Qwen2.5-7B-Instruct", 3584, 28, 28, 4, 18944, 152064, False),
}


@dataclass(frozen=True)
class Workload:
    """The batch an update trains on and the one vLLM serves (the paper preset's sizes by default)."""

    batch_size: int = 8            # sequences per GPU per micro-step
    seq_len: int = 9000            # prompt + completion tokens
    completion_len: int = 1024     # tokens whose logits are computed
    gradient_checkpointing: bool = True
    reference: bool = True         # kl_coef > 0
    lora_r: int = 16
    vllm_seqs: int = 32            # sequences in flight at full length
    tensor_parallel: int = 1
    loss: str = "grpo"             # grpo (update-agent) | rwr (update-env)
    compute_bytes: int = 2         # bytes of the compute dtype (bf16)
    # this process's allocator setting (PYTORCH_CUDA_ALLOC_CONF; unset: the training stages set expandable segments)
    expandable_segments: bool = field(default_factory=expandable_segments_on)
    head_in_loss: bool = True      # the losses apply the LM head themselves (False: the model's head gives logits)


# update-env at the paper preset's sizes: 8 pairs per GPU per micro-step, the environment's prompt and its output of
# up to 2,560 tokens (the mixed domains' generate.max_new_tokens), the KL to the initial model always on
ENV_WORKLOAD = Workload(seq_len=4608, completion_len=2560, reference=True, loss="rwr")


def loss_route(method: str, w: Workload) -> str:
    """`head` (the losses apply the LM head from the hidden states) or `logits` (DeepSpeed ZeRO-3, or a model whose
    head the losses cannot take out: Workload.head_in_loss)."""
    return "head" if w.head_in_loss and method != "zero3" else "logits"


def output_bytes(method: str, w: Workload) -> int:
    """Bytes per element of the model's outputs as they reach the loss: the compute dtype under FSDP2 (its mixed
    precision leaves them in the parameter dtype), float32 where accelerate converts them (bf16/fp16 autocast).

    >>> output_bytes("fsdp", Workload()), output_bytes("lora", Workload()), output_bytes("full", Workload())
    (2, 4, 4)
    """
    if w.compute_bytes >= 4:
        return w.compute_bytes
    return w.compute_bytes if method == "fsdp" else 4


def loss_bytes(shape: Shape, w: Workload, method: str = "lora") -> float:
    """The loss's tensors (module docstring), by route: from the hidden states, the head inside the loss; or from
    the logits (ZeRO-3)."""
    if w.loss not in ("rwr", "grpo"):
        raise ValueError(f"unknown loss {w.loss!r}")
    tokens = w.batch_size * w.completion_len
    entries = tokens * shape.vocab
    chunk = min(LOSS_CHUNK_ELEMENTS, entries)
    out = output_bytes(method, w)
    cast = w.compute_bytes if w.compute_bytes < out else 0
    models = 2 if w.loss == "rwr" else 1  # update-env's exact KL needs the reference's too
    if loss_route(method, w) == "logits":
        return (models * out + out + cast) * entries + LOSS_TEMPORARIES * 4 * chunk
    hidden = (models * out + out + cast) * tokens * shape.hidden
    temporaries = LOSS_TEMPORARIES * 4 * chunk + models * w.compute_bytes * chunk
    head = 0
    if method in ("full", "fsdp"):  # the head trains: its weight cast once per pass, its float32 gradient
        head = (w.compute_bytes if w.compute_bytes < 4 else 0) * shape.vocab * shape.hidden \
            + 4 * shape.vocab * shape.hidden
    return hidden + temporaries + head


def activations_bytes(shape: Shape, w: Workload, method: str = "lora") -> float:
    """Activations and the loss's tensors, with the allocator's slack on top (module docstring)."""
    tokens = w.batch_size * w.seq_len
    per_layer = 34 * shape.hidden * tokens
    kept = (2 * shape.hidden * tokens * shape.layers + per_layer) if w.gradient_checkpointing \
        else per_layer * shape.layers
    return (kept + loss_bytes(shape, w, method)) * (1 + ALLOCATOR_SLACK[w.expandable_segments])


def root_params(shape: Shape) -> int:
    """Parameters outside the decoder layers: the embedding, the final norm and (untied) the head."""
    return shape.params() - shape.layers * shape.layer_params()


def training_bytes(shape: Shape, method: str, gpus: int, w: Workload = Workload()) -> dict[str, float]:
    """Bytes per GPU of an update, by part. method: lora | full (unsharded) | fsdp | zero3."""
    P = shape.params()
    parts: dict[str, float] = {}
    if method == "lora":
        A = shape.lora_params(w.lora_r)
        parts["weights"] = 2 * P + 4 * A
        parts["grads"] = 4 * A
        parts["adam"] = 8 * A
        parts["master"] = 0.0
    elif method in ("full", "fsdp"):
        n = 1 if method == "full" else gpus
        parts["weights"] = 4 * P / n
        parts["grads"] = 4 * P / n
        parts["adam"] = 8 * P / n
        parts["master"] = 0.0  # the float32 weights are the master copy
    elif method == "zero3":
        parts["weights"] = 2 * P / gpus
        parts["grads"] = 2 * P / gpus
        parts["adam"] = 8 * P / gpus
        parts["master"] = 4 * P / gpus
    else:
        raise ValueError(f"unknown method {method!r}")
    gathered_bytes = {"fsdp": 4, "zero3": 2}.get(method, 0)
    parts["gathered"] = 2 * gathered_bytes * shape.layer_params()
    if method == "fsdp":  # the root's parameters and their gradients, unsharded for the whole step
        parts["gathered"] += 2 * 4 * root_params(shape)
    parts["reference"] = 2 * P if (w.reference and method != "lora") else 0.0
    parts["activations"] = activations_bytes(shape, w, method)
    parts["total"] = sum(parts.values())
    return parts


def vllm_bytes(shape: Shape, w: Workload = Workload()) -> dict[str, float]:
    weights = 2 * shape.params() / w.tensor_parallel
    kv_per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2 / w.tensor_parallel
    kv = kv_per_token * w.vllm_seqs * w.seq_len
    return {"weights": weights, "kv_cache": kv, "total": weights + kv}


LAUNCH = {
    "lora": "accelerate launch --config_file pipelines/accelerate/ddp.yaml -m genenv_cli",
    "full": "genenv (one GPU)",
    "fsdp": "accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml -m genenv_cli",
    "zero3": "accelerate launch --config_file pipelines/accelerate/zero3.yaml -m genenv_cli",
}
METHOD_NAMES = {"lora": "LoRA (r 16)", "fsdp": "full / FSDP", "zero3": "full / ZeRO-3"}


def table(gpus: int = 8, w: Workload = Workload(), env: Workload = ENV_WORKLOAD) -> str:
    """docs/gpus.md's memory table, in markdown: update-agent, update-env and vLLM per GPU, gradient checkpointing
    on (as the paper preset sets it), and LoRA once more with it off (the setting's default)."""
    rows = ["| model | method | update-agent, GB per GPU | update-env, GB per GPU | vLLM, GB per GPU | TRAIN= launch |",
            "|---|---|---|---|---|---|"]
    for size, shape in QWEN25.items():
        serve = vllm_bytes(shape, w)["total"] / GB
        variants = [(m, label, True) for m, label in METHOD_NAMES.items()]
        variants.append(("lora", METHOD_NAMES["lora"] + ", no gradient checkpointing", False))
        for method, label, checkpointing in variants:
            agent = training_bytes(shape, method, gpus, replace(w, gradient_checkpointing=checkpointing))["total"]
            envb = training_bytes(shape, method, gpus, replace(env, gradient_checkpointing=checkpointing))["total"]
            rows.append(f"| {size} | {label} | {agent / GB:.1f} | {envb / GB:.1f} | {serve:.1f} | `{LAUNCH[method]}` |")
    return "\n".join(rows)


def host_bytes(shape: Shape, processes: int, checkpoint_bytes: float) -> dict[str, float]:
    """Host memory of one machine running `processes` training (or generation) processes that read a checkpoint
    of `checkpoint_bytes` (module docstring): the processes' own, and the page cache the checkpoint occupies."""
    own = processes * (PROCESS_HOST_BYTES + 4 * shape.vocab * shape.hidden)
    return {"processes": own, "page_cache": checkpoint_bytes, "total": own + checkpoint_bytes}


def host_table(gpus: int = 8) -> str:
    """docs/gpus.md's host-memory table: one machine of `gpus` GPUs training with one process per GPU, reading
    the float32 checkpoint of a full fine-tune (the largest it reads)."""
    rows = ["| model | processes | their own memory, GB | checkpoint in the page cache, GB | total, GB |",
            "|---|---|---|---|---|"]
    for size, shape in QWEN25.items():
        h = host_bytes(shape, gpus, 4 * shape.params())
        rows.append(f"| {size} | {gpus} | {h['processes'] / GB:.1f} | {h['page_cache'] / GB:.1f} | "
                    f"{h['total'] / GB:.1f} |")
    return "\n".join(rows)


def shape_of_config(cfg: dict) -> Shape | None:
    """A Shape from a model's config.json (None when a field the formulas need is missing)."""
    try:
        heads = int(cfg["num_attention_heads"])
        return Shape(str(cfg.get("_name_or_path", "")), int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]),
                     heads, int(cfg.get("num_key_value_heads", heads)), int(cfg["intermediate_size"]),
                     int(cfg["vocab_size"]), bool(cfg.get("tie_word_embeddings", False)))
    except (KeyError, TypeError, ValueError):
        return None
