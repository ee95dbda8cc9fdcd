"""The transformers engine: sampled-token logprobs, n samples per prompt, seeds, finish reasons."""

import pytest
import torch

from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve

CONVS = [[{"role": "user", "content": "Weather in Lima?"}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Convert 100 USD to EUR and GBP."}]]


@pytest.fixture(scope="module")
def engine(tiny_model):
    return HFEngine(resolve(str(tiny_model)), batch_size=3)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0)])
@pytest.mark.slow
def test_logprobs_match_a_forward_pass(engine, temperature, top_p):
    out = engine.generate(CONVS, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=10, n=2, seed=3))
    assert [len(o) for o in out] == [2, 2]
    for gens in out:
        for g in gens:
            assert len(g.token_ids) == len(g.logprobs) >= 1
            ids = torch.tensor([g.prompt_token_ids + g.token_ids])
            with torch.no_grad():
                logits = engine.model(ids).logits[0, len(g.prompt_token_ids) - 1:-1].float() / temperature
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(g.token_ids)[:, None]).squeeze(1)
            assert torch.allclose(ref, torch.tensor(g.logprobs), atol=1e-4)
            assert g.finish_reason == ("stop" if g.token_ids[-1] in engine.eos_ids else "length")


def test_seed_makes_sampling_reproducible(engine):
    p = SamplingParams(max_new_tokens=8, n=3, seed=11)
    a = engine.generate(CONVS, p)
    b = engine.generate(CONVS, p)
    assert [[g.token_ids for g in x] for x in a] == [[g.token_ids for g in x] for x in b]
    c = engine.generate(CONVS, SamplingParams(max_new_tokens=8, n=3, seed=12))
    assert [[g.token_ids for g in x] for x in a] != [[g.token_ids for g in x] for x in c]


def test_greedy_is_deterministic_and_scores_the_argmax(engine):
    out = engine.generate(CONVS[:1], SamplingParams(temperature=0.0, max_new_tokens=6, n=2))
    assert out[0][0].token_ids == out[0][1].token_ids
    g = out[0][0]
    ids = torch.tensor([g.prompt_token_ids + g.token_ids])
    with torch.no_grad():
        logits = engine.model(ids).logits[0, len(g.prompt_token_ids) - 1:-1]
    assert logits.argmax(-1).tolist() == g.token_ids


def test_stop_and_length(engine):
    out = engine.generate(CONVS, SamplingParams(max_new_tokens=1, n=1, seed=0))
    for gens in out:
        assert len(gens[0].token_ids) == 1


@pytest.mark.slow
def test_embedded_model_generates(tmp_path):
    """The real embedded model: converted once into the cache, then loaded from there."""
    from genenv_cli.machinery.models import embedded_dir, ensure_embedded

    path = ensure_embedded()
    assert path == embedded_dir() and (path / "config.json").exists()
    eng = HFEngine(resolve("embedded"), batch_size=2)
    out = eng.generate([[{"role": "user", "content": "What is 2+3? Answer with a number."}]],
                       SamplingParams(temperature=0.0, max_new_tokens=12))
    assert "5" in out[0][0].text


def test_progress_counts_tokens_at_every_step_and_sequences_once_a_batch(engine):
    calls = []
    out = engine.generate(CONVS, SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=1),
                          on_progress=lambda s, t: calls.append((s, t)))
    sequences = [s for s, _ in calls if s]
    assert sequences == [3, 1]          # batches of 3: the sequences once each batch ends
    assert len(calls) > len(sequences) + 2 and all(t == 0 for s, t in calls if s)  # tokens come step by step
    assert sum(t for _, t in calls) == sum(len(g.token_ids) for gens in out for g in gens)
