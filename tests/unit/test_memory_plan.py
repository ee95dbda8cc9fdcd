"""docs/gpus.md's memory table is computed by memory_plan, and memory_plan follows the formulas it states."""


from dataclasses import replace

import pytest

from genenv_cli.core.memory_plan import (
    ALLOCATOR_SLACK,
    ENV_WORKLOAD,
    GB,
    LOSS_CHUNK_ELEMENTS,
    LOSS_TEMPORARIES,
    PROCESS_HOST_BYTES,
    QWEN25,
    Workload,
    default_allocator,
    expandable_segments_on,
    host_bytes,
    host_table,
    loss_bytes,
    root_params,
    table,
    training_bytes,
    vllm_bytes,
)
from paths import ROOT

DOC = ROOT / "docs" / "gpus.md"


def test_parameter_counts_match_the_published_sizes():
    assert QWEN25["0.5B"].params() == pytest.approx(0.494e9, rel=0.01)
    assert QWEN25["1.5B"].params() == pytest.approx(1.544e9, rel=0.01)
    assert QWEN25["7B"].params() == pytest.approx(7.616e9, rel=0.01)


def test_training_memory_follows_the_formulas():
    s, w = QWEN25["7B"], Workload()
    P = s.params()
    full = training_bytes(s, "full", 1, w)
    assert full["weights"] == full["grads"] == 4 * P and full["adam"] == 8 * P and full["master"] == 0
    assert full["reference"] == 2 * P
    fsdp = training_bytes(s, "fsdp", 8, w)
    assert fsdp["weights"] + fsdp["grads"] + fsdp["adam"] == pytest.approx(16 * P / 8)
    assert fsdp["gathered"] == 2 * 4 * s.layer_params() + 2 * 4 * root_params(s)
    assert root_params(s) == 2 * s.vocab * s.hidden + s.hidden   # untied: embedding, head, final norm
    z3 = training_bytes(s, "zero3", 8, w)
    assert (z3["weights"], z3["grads"], z3["master"], z3["adam"]) == pytest.approx((2 * P / 8, 2 * P / 8, 4 * P / 8,
                                                                                     8 * P / 8))
    lora = training_bytes(s, "lora", 8, w)
    A = s.lora_params(16)
    assert A == 28 * 16 * (2 * (3584 + 3584) + 2 * (3584 + 512))
    assert lora["weights"] == 2 * P + 4 * A and lora["adam"] == 8 * A and lora["reference"] == 0
    tokens = w.batch_size * w.seq_len
    assert full["activations"] == pytest.approx((2 * s.hidden * tokens * s.layers + 34 * s.hidden * tokens
                                                 + loss_bytes(s, w, "full")) * (1 + ALLOCATOR_SLACK[True]))
    # the state of an unsharded 7B full fine-tune: about 122 GB before activations and the reference
    assert (full["weights"] + full["grads"] + full["adam"]) / GB == pytest.approx(121.8, abs=0.5)
    for part in (full, fsdp, z3, lora):
        assert part["total"] == pytest.approx(sum(v for k, v in part.items() if k != "total"))


def test_vllm_memory_is_weights_plus_kv_cache():
    s, w = QWEN25["7B"], Workload()
    v = vllm_bytes(s, w)
    assert v["weights"] == 2 * s.params()
    assert v["kv_cache"] == 2 * 28 * 4 * 128 * 2 * w.vllm_seqs * w.seq_len


def test_the_losses_keep_no_vocabulary_tensor_per_token():
    """Both losses apply the head inside the loss: per target token only the hidden states (as they reach the loss,
    their gradient and its cast; update-env's reference's too), one chunk, and where the head trains its bf16 copy and
    float32 gradient. Through the logits (ZeRO-3) it is 14 bytes x vocabulary per target token for update-env."""
    s = QWEN25["7B"]
    w = Workload(batch_size=8, completion_len=2560, loss="rwr")
    tokens, entries, chunk = 8 * 2560, 8 * 2560 * s.vocab, LOSS_CHUNK_ELEMENTS
    temporaries = LOSS_TEMPORARIES * 4 * chunk
    assert loss_bytes(s, w, "lora") == (4 + 4 + 4 + 2) * tokens * s.hidden + temporaries + 2 * 2 * chunk
    assert loss_bytes(s, w, "fsdp") == (2 + 2 + 2) * tokens * s.hidden + temporaries + 2 * 2 * chunk \
        + (2 + 4) * s.vocab * s.hidden
    assert loss_bytes(s, w, "zero3") == (4 + 4 + 4 + 2) * entries + temporaries
    assert (4 + 4 + 4 + 2) * entries / GB == pytest.approx(43.6, abs=0.1)   # the logits route at this size
    assert loss_bytes(s, w, "lora") / GB == pytest.approx(2.0, abs=0.1)
    agent = Workload(batch_size=8, completion_len=1024)
    assert loss_bytes(s, agent, "lora") == (4 + 4 + 2) * 8 * 1024 * s.hidden + temporaries + 2 * chunk
    assert loss_bytes(s, replace(agent, head_in_loss=False), "lora") == (4 + 4 + 2) * 8 * 1024 * s.vocab + temporaries
    assert ENV_WORKLOAD.loss == "rwr" and ENV_WORKLOAD.reference
    env = training_bytes(s, "fsdp", 8, ENV_WORKLOAD)
    assert env["activations"] == pytest.approx((2 * s.hidden * 8 * 4608 * s.layers + 34 * s.hidden * 8 * 4608
                                                + loss_bytes(s, ENV_WORKLOAD, "fsdp")) * (1 + ALLOCATOR_SLACK[True]))


def test_the_allocator_setting_is_the_users_or_expandable_segments():
    env = {}
    assert default_allocator(env) and env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert expandable_segments_on(env)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        mine = {name: "max_split_size_mb:256"}
        assert not default_allocator(mine) and mine == {name: "max_split_size_mb:256"}   # the user's, untouched
        assert not expandable_segments_on(mine)
    assert expandable_segments_on({"PYTORCH_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:64"})
    plain = Workload(expandable_segments=False)
    assert training_bytes(QWEN25["7B"], "lora", 1, plain)["activations"] > \
        training_bytes(QWEN25["7B"], "lora", 1, Workload(expandable_segments=True))["activations"]


def test_host_memory_is_the_processes_own_and_the_page_cache():
    s = QWEN25["7B"]
    h = host_bytes(s, 8, 4 * s.params())
    assert h["processes"] == 8 * (PROCESS_HOST_BYTES + 4 * s.vocab * s.hidden)
    assert h["page_cache"] == 4 * s.params() and h["total"] == h["processes"] + h["page_cache"]
    assert h["total"] / GB == pytest.approx(71.9, abs=0.1)   # against 8 x (4 + 2) P = 365 GB loaded on the CPU


def test_the_tables_in_the_docs_are_the_computed_ones():
    text = DOC.read_text()
    assert table() in text and host_table() in text
    assert "| 7B | LoRA (r 16), no gradient checkpointing | 286.9 |" in table()   # the defaults at 7B: warned
