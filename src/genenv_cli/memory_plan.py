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
  without it every layer keeps its 34 x hidden. Plus the full-vocabulary tensors of the loss, per completion
  (target) token. Under bf16 mixed precision accelerate converts the model's outputs to float32, so the logits
  reach the loss in float32 (4 bytes x vocab) whatever the compute dtype; both losses work through the positions in
  chunks (training/target_logps.py, training/rwr.py) and keep only those logits, and in the backward pass their
  float32 gradient and its cast back to the compute dtype. update-env's exact KL also keeps the reference's logits
  (4 bytes x vocab). So about 10 bytes x vocab per target token for update-agent and 14 for update-env in bf16,
  plus one chunk's float32 temporaries (LOSS_TEMPORARIES x 4 bytes x LOSS_CHUNK_ELEMENTS). The GPU check
  (benchmarks/gpu/) measures both against this. Computed over the whole vocabulary at once the exact KL kept about
  24 bytes x vocab per token in float32: 44 GB at 8 x 1,500 target tokens of Qwen's vocabulary.
- vLLM: the weights in the compute dtype (2 P, divided over `tensor_parallel_size`) plus the KV cache of a batch
  of full-length sequences: 2 (K and V) x layers x kv_heads x head_dim x 2 bytes per token.
- Host memory per machine: every model is read straight onto its GPU (models.load_model), so no process holds
  weights in host memory; each holds its libraries and CUDA context (PROCESS_HOST_BYTES, an estimate) and, in
  transit, the largest tensor converted to float32 (the embedding: 4 x vocab x hidden). The checkpoint being read
  sits in the page cache, shared by the processes and given back under pressure (2 P for the bf16 base, 4 P for a
  float32 full fine-tuning checkpoint). Read onto the CPU first, as before, each training process held its float32
  copy (4 P) and its reference (2 P): 245 GB plus 15 GB per reference for 8 ranks at 7B.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GB = 1e9
# both updates' losses work through the target positions in chunks of at most this many (position x vocabulary)
# elements, a few float32 tensors of that size alive at once (training/target_logps.py, training/rwr.py)
LOSS_CHUNK_ELEMENTS = 2**25
LOSS_TEMPORARIES = 6
# a training or generation process's own host memory on a GPU machine (Python, torch, CUDA's context and libraries,
# the pool's rows): an estimate, about 0.5 GB of it measured on CPU; benchmarks/gpu/ records the real one
PROCESS_HOST_BYTES = 3e9


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


# update-env at the paper preset's sizes: 8 pairs per GPU per micro-step, the environment's prompt and its output of
# up to 2,560 tokens (the mixed domains' generate.max_new_tokens), the KL to the initial model always on
ENV_WORKLOAD = Workload(seq_len=4608, completion_len=2560, reference=True, loss="rwr")


def loss_bytes(shape: Shape, w: Workload) -> float:
    """The loss's full-vocabulary tensors (module docstring): float32 logits (accelerate's output conversion), the
    reference's for update-env's exact KL, the logits' float32 gradient and its cast to the compute dtype."""
    entries = w.batch_size * w.completion_len * shape.vocab
    chunk = LOSS_TEMPORARIES * 4 * min(LOSS_CHUNK_ELEMENTS, entries)
    cast = w.compute_bytes if w.compute_bytes < 4 else 0
    if w.loss == "rwr":
        return (4 + 4 + 4 + cast) * entries + chunk
    if w.loss == "grpo":
        return (4 + 4 + cast) * entries + chunk
    raise ValueError(f"unknown loss {w.loss!r}")


def activations_bytes(shape: Shape, w: Workload) -> float:
    tokens = w.batch_size * w.seq_len
    per_layer = 34 * shape.hidden * tokens
    kept = (2 * shape.hidden * tokens * shape.layers + per_layer) if w.gradient_checkpointing \
        else per_layer * shape.layers
    return kept + loss_bytes(shape, w)


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
    parts["reference"] = 2 * P if (w.reference and method != "lora") else 0.0
    parts["activations"] = activations_bytes(shape, w)
    parts["total"] = sum(parts.values())
    return parts


def vllm_bytes(shape: Shape, w: Workload = Workload()) -> dict[str, float]:
    weights = 2 * shape.params() / w.tensor_parallel
    kv_per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2 / w.tensor_parallel
    kv = kv_per_token * w.vllm_seqs * w.seq_len
    return {"weights": weights, "kv_cache": kv, "total": weights + kv}


LAUNCH = {
    "lora": "accelerate launch --config_file stages/accelerate/ddp.yaml -m genenv_cli",
    "full": "genenv (one GPU)",
    "fsdp": "accelerate launch --config_file stages/accelerate/fsdp-full-shard.yaml -m genenv_cli",
    "zero3": "accelerate launch --config_file stages/accelerate/zero3.yaml -m genenv_cli",
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
