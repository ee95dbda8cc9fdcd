"""Key/value reuse across an episode's turns in the hf engine (engines/episode_cache.py): with it on, a turn runs only
its new tokens, and every token and logprob is what the full re-read of each turn's prompt gives (greedy: the same
tokens; sampled: the same tokens and logprobs within the tolerance the engine's logprobs keep against a forward
pass), for multi-turn episodes batched together, for rows that end their turn early and for a prompt that does not
extend the kept tokens."""

from __future__ import annotations

import pytest

from episode_domains import NAME, register
from genenv_cli.machinery.engines.episode_cache import Kept, common_prefix, reuse_lengths

TOL = 1e-4  # test_engine.py: the engine's logprobs against a forward pass


def test_common_prefix_and_what_a_turn_reuses():
    assert common_prefix(list(range(100)), [*range(57), 0, 1]) == 57
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 3 and common_prefix([4], [5]) == 0
    kept = Kept([1, 2, 3, 4], [])
    # the kept tokens, less where the prompt differs, and never the prompt's last token (its logits start the answer)
    assert reuse_lengths([kept, kept, kept, None], [[1, 2, 3, 4, 9], [1, 2, 7, 4], [1, 2, 3], [1, 2]]) == [4, 2, 2, 0]


@pytest.fixture(scope="module")
def engines(tiny_model):
    import torch

    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    on = HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32", batch_size=4)
    with torch.no_grad():  # sharper weights: greedy answers that change with the context instead of one repeated token
        for p in on.model.parameters():
            if p.dim() == 2:
                p.mul_(8.0)
    off = HFEngine(on.ref, batch_size=4, model=on.model, tokenizer=on.tokenizer, reuse_cache=False)
    return on, off


@pytest.fixture
def three_turns():
    register()
    yield
    from genenv_cli.catalogue.domains import DOMAINS

    DOMAINS.unregister(NAME)


def _play(engine, temperature: float, stops: list[int]):
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.stages.rollout_episodes import play_tasks

    engine.eos_ids = stops
    tasks = [{"domain": NAME, "payload": {"expression": f"{a} + {b}", "answer": a + b}}
             for a, b in [(1, 2), (3, 4), (12, 7)]]
    stats: dict[str, int] = {}
    params = SamplingParams(temperature=temperature, max_new_tokens=8, n=3, seed=5)
    rows = play_tasks(engine, {NAME: get_domain(NAME)}, tasks, params, [0, 10, 20], stats=stats)
    return [r for task in rows for r in task], stats


def _agent_turns(mask: list[int]) -> list[int]:
    """The lengths of the runs of the agent's tokens."""
    runs = "".join(map(str, mask)).split("0")
    return [len(r) for r in runs if r]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_multi_turn_episodes_with_reuse_draw_what_the_full_re_read_draws(engines, three_turns, temperature):
    import torch

    on, off = engines
    # many end-of-turn ids: rows end their turns at different steps, leave the batch early and keep what they had
    stops = [on.tokenizer.eos_token_id, *range(200, 300)]
    reused, stats_on = _play(on, temperature, stops)
    full, stats_off = _play(off, temperature, stops)
    assert [r["completion_token_ids"] for r in reused] == [r["completion_token_ids"] for r in full]
    turn_lengths = {n for r in reused for n in _agent_turns(r["agent_mask"])}
    assert 8 in turn_lengths and len(turn_lengths) > 2  # some turns ran to their budget, others ended early
    for a, b in zip(reused, full, strict=True):
        assert max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"], strict=True)) < TOL
    # the same prompts were sent; with reuse most of their tokens came from the kept cache, and nothing stays kept
    assert stats_on["prompt_tokens"] == stats_off["prompt_tokens"] and stats_off["cached_tokens"] == 0
    first_turn = sum(len(r["prompt_token_ids"]) for r in reused)
    assert stats_on["cached_tokens"] > 0.8 * (stats_on["prompt_tokens"] - first_turn)
    assert not on._kept
    if temperature:  # the sampler's logprobs against the trainer's forward pass over the whole episode
        for r in reused:
            ids = torch.tensor([r["prompt_token_ids"] + r["completion_token_ids"]])
            with torch.no_grad():
                logits = on.model(ids).logits[0, len(r["prompt_token_ids"]) - 1:-1].float()
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(r["completion_token_ids"])[:, None]).squeeze(1)
            agent = torch.tensor(r["agent_mask"], dtype=torch.bool)
            assert torch.allclose(ref[agent], torch.tensor(r["logprobs"])[agent], atol=TOL)


def test_single_turn_prompts_and_a_prompt_that_does_not_extend_the_kept_tokens(engines):
    from genenv_cli.machinery.engines import SamplingParams

    on, off = engines
    on.eos_ids = off.eos_ids = [on.tokenizer.eos_token_id]
    convs = [[{"role": "user", "content": "Weather in Lima?"}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Convert 100 USD to EUR."}]]
    prompts = [on.prompt_ids(m) for m in convs]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6, n=1)
    # single-turn prompts: the same tokens with sessions or without, on either engine
    first = on.generate_ids(prompts, greedy, sessions=["a", "b"])
    assert [g[0].token_ids for g in first] == [g[0].token_ids for g in off.generate_ids(prompts, greedy)]
    assert [g[0].cached_tokens for g in first] == [0, 0] and set(on._kept) == {"a", "b"}
    # next turn: "a" extends its answer, "b" rewrites its last user turn (only the template's head is reused), and a
    # fresh session "c" joins the same batch
    a = first[0][0].prompt_token_ids + first[0][0].token_ids + on.tokenizer("\nmore", add_special_tokens=False)[
        "input_ids"]
    b = on.prompt_ids([convs[1][0], {"role": "user", "content": "Convert 7 EUR to GBP."}])
    c = prompts[0]
    second = on.generate_ids([a, b, c], greedy, sessions=["a", "b", "c"])
    assert [g[0].token_ids for g in second] == [g[0].token_ids for g in off.generate_ids([a, b, c], greedy)]
    cached = [g[0].cached_tokens for g in second]
    assert cached[0] == len(first[0][0].prompt_token_ids) + len(first[0][0].token_ids) - 1
    assert 0 < cached[1] < len(prompts[1]) and cached[2] == 0
    on.release(["a", "b", "c"])
    assert not on._kept
    with pytest.raises(ValueError, match="one distinct key per prompt"):
        on.generate_ids([a, b], greedy, sessions=["a", "a"])
    with pytest.raises(ValueError, match="n = 2"):
        on.generate_ids([a], SamplingParams(temperature=0.0, max_new_tokens=2, n=2), sessions=["a"])
