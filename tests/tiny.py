"""A tiny chat model built from nothing, for tests: a byte-level BPE tokenizer trained on the domain's own
text with a ChatML template, and a 2-layer llama. Builds in well under a second; no file from anywhere."""

from __future__ import annotations

import contextlib
import io
import json
from importlib import resources
from pathlib import Path

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def _corpus() -> list[str]:
    data = resources.files("genenv_cli.domains").joinpath("data")
    text = [data.joinpath("tool_call_tools.json").read_text(), data.joinpath("tool_call_seeds.jsonl").read_text()]
    text.append("REQUEST: TOOLS: CALLS: <tool_call> </tool_call> 0123456789 + - * / = ( ) ? Answer:")
    return text


def build_tiny_model(folder: Path, *, layers: int = 2, hidden: int = 64, vocab: int = 700, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(_corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tok.chat_template = CHATML
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    with contextlib.redirect_stderr(io.StringIO()):  # transformers draws a progress bar while saving
        model.save_pretrained(folder)
    (folder / "tiny.json").write_text(json.dumps({"layers": layers, "hidden": hidden, "vocab": len(tok)}))
    return folder


def teach_arith_format(folder: Path, *, steps: int = 100, seed: int = 0) -> Path:
    """Fine-tune the tiny model for a few steps on `Compute a + b` -> `Answer: c`, so that sampling it gives
    a mix of right and wrong answers (GRPO needs groups whose rewards differ)."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv_cli.domains.arith import ArithDomain

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(steps):
        batch = []
        for _ in range(16):
            a, b = rng.randint(1, 4), rng.randint(1, 4)
            msgs = [*ArithDomain().agent_messages({"expression": f"{a} + {b}", "answer": a + b}),
                    {"role": "assistant", "content": f"Answer: {a + b}"}]
            batch.append(tok.apply_chat_template(msgs, tokenize=False))
        enc = tok(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    with contextlib.redirect_stderr(io.StringIO()):
        model.save_pretrained(folder)
    return folder


# Settings of a small run on the tiny model (conftest.py's make_run), and of two whole epochs of full fine-tuning
# on it (conftest.py's two_full_epochs; test_run_kills.py kills the same run)
SMALL = [
    "generate.tasks_per_epoch=6", "generate.variations=2", "generate.seed_share=0.5", "generate.max_new_tokens=24",
    "generate.max_rounds=1", "rollout.group_size=3", "rollout.max_new_tokens=12", "rollout.batch_size=16",
    "run.eval_every=0",
]

TWO_EPOCHS = [
    "generate.tasks_per_epoch=4", "generate.variations=2", "generate.seed_share=0.5", "generate.max_new_tokens=12",
    "generate.max_rounds=1", "rollout.group_size=4", "rollout.max_new_tokens=6", "curriculum.k_min=1.0",
    "agent_update.lora=false", "env_update.lora=false", "agent_update.learning_rate=0.005",
    "env_update.learning_rate=0.005", "env_update.kl_max=100", "agent_update.batch_size=8", "env_update.batch_size=8",
    "run.keep_checkpoints=0", "run.eval_every=0",
]
