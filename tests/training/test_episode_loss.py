"""GRPO over whole episodes: an episode's row is its first prompt, then every token after it (the agent's sampled
turns and the environment's observations), with a mask of the agent's tokens as the completion mask.

- a one-turn episode (a single-turn domain played through the episode engine) draws exactly the single-turn sample
  and gives exactly today's loss and gradient;
- the gradient with respect to the observation tokens' positions is zero, with the KL and the importance weight on;
- the trainer's old-policy logprobs, recomputed over the whole multi-turn episode, match the sampler's on the
  agent's tokens within the tolerance single-turn rollouts are held to (1e-4 nats).
"""

from __future__ import annotations

import pytest
import torch

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.domains.base import END_DONE, DomainEpisode, Environment, Step
from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.episodes import TokenTrace, observation_ids, play
from genenv_cli.machinery.models import resolve
from genenv_cli.machinery.training.grpo import collate, grpo_loss, old_policy_table
from genenv_cli.machinery.training.logits import token_logps

TOLERANCE = 1e-4  # the sampler/trainer gap single-turn rollouts are held to (tests/training/test_mismatch.py)


class ThreeTurns(Environment):
    """Replies to the agent's first two turns with an observation; the third ends the episode."""

    def first_messages(self):
        return [{"role": "system", "content": "Solve it."}, {"role": "user", "content": f"Compute {self.payload['x']} + 4"}]

    def step(self, action):
        self.turn = getattr(self, "turn", 0) + 1
        if self.turn < 3:
            return Step(f"calc({self.payload['x']} + {self.turn}) = {self.payload['x'] + self.turn}", False)
        return Step(None, True, 1.0 if "7" in action else 0.0)


@pytest.fixture(scope="module")
def engine(tiny_model):
    return HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32", batch_size=8)


def _episodes(engine, envs, max_turns, params, seeds):
    episodes = [DomainEpisode(env, max_turns, "test") for env in envs]
    traces = [TokenTrace(engine.prompt_ids(e.messages)) for e in episodes]
    play(episodes, engine, params, context_limit=engine.context_limit(), traces=traces, seeds=seeds)
    return episodes, traces


def _row(trace, advantage, mask=True):
    row = {"prompt_ids": trace.prompt_ids, "completion_ids": trace.token_ids, "sampler_logps": trace.logprobs,
           "advantage": advantage}
    if mask:
        row["agent_mask"] = trace.agent_mask
    return row


def _loss_and_grads(model, rows, pad_id):
    model.zero_grad()
    b = collate(rows, pad_id)
    n = b["completion_mask"].shape[1]
    logps = token_logps(model, b["input_ids"], b["attention_mask"], n, 1.0)
    logps.retain_grad()
    with torch.no_grad():
        ref = logps.detach() - 0.05 * torch.arange(n).float()  # a reference away from the policy: the KL is not 0
    loss, stats = grpo_loss(logps, logps.detach(), b["advantages"], b["completion_mask"], clip_eps=0.2,
                            kl_coef=0.1, ref_logps=ref, loss_type="grpo", sampler_logps=b["sampler_logps"],
                            is_cap=3.0)
    loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), grads, logps.grad, b, stats


def test_a_one_turn_episode_is_the_single_turn_sample_with_todays_loss_and_gradient(engine):
    arith = get_domain("arith")
    payloads = [{"expression": "3 + 4", "answer": 7}, {"expression": "12 * 3", "answer": 36}]
    params = SamplingParams(temperature=1.0, max_new_tokens=6, n=1, seed=0)
    seeds = [101, 202]
    single = engine.generate([arith.agent_messages(p) for p in payloads], params, seeds=seeds)
    episodes, traces = _episodes(engine, [arith.environment(p) for p in payloads], arith.max_turns, params, seeds)
    for (g,), e, t in zip(single, episodes, traces, strict=True):
        assert (t.prompt_ids, t.token_ids, t.logprobs) == (g.prompt_token_ids, g.token_ids, g.logprobs)
        assert t.agent_mask == [1] * len(g.token_ids) and e.turns == 1 and e.end == END_DONE
        assert e.verdict == arith.score(payloads[episodes.index(e)], g.text)
    pad = engine.tokenizer.pad_token_id
    today = [_row(t, a, mask=False) for t, a in zip(traces, (1.0, -1.0), strict=True)]
    loss_a, grads_a, _, _, stats_a = _loss_and_grads(engine.model, today, pad)
    loss_b, grads_b, _, _, stats_b = _loss_and_grads(engine.model, [_row(t, a) for t, a in
                                                                   zip(traces, (1.0, -1.0), strict=True)], pad)
    assert torch.equal(loss_a, loss_b) and stats_a == stats_b
    assert grads_a.keys() == grads_b.keys() and all(torch.equal(grads_a[k], grads_b[k]) for k in grads_a)
    assert any(float(g.abs().sum()) > 0 for g in grads_a.values())


def test_observation_tokens_get_no_gradient_no_kl_and_no_importance_weight(engine):
    params = SamplingParams(temperature=1.0, max_new_tokens=5, n=1, seed=0)
    envs = [ThreeTurns(None, {"x": x}) for x in (3, 5)]
    episodes, traces = _episodes(engine, envs, 3, params, [7, 8])
    assert [e.turns for e in episodes] == [3, 3]
    _, _, grad, b, stats = _loss_and_grads(engine.model, [_row(t, a) for t, a in zip(traces, (1.0, -1.0),
                                                                                      strict=True)],
                                           engine.tokenizer.pad_token_id)
    for i, t in enumerate(traces):
        mask = torch.tensor(t.agent_mask, dtype=torch.bool)
        assert (~mask).sum() > 0 and mask.sum() == 15   # two observations between three 5-token turns
        row = grad[i, :len(t.agent_mask)]
        assert torch.count_nonzero(row[~mask]) == 0     # exactly zero at every observation position
        assert torch.count_nonzero(row[mask]) == int(mask.sum())
    assert stats["tokens"] == 30                          # the statistics count the agent's tokens only
    # a surrogate and a KL that are not zero at the observation positions, had they been counted: the mask is what
    # removes them (the sampler's logprob there is 0, so their importance weight would be exp(old) < 1)
    assert float((b["sampler_logps"] * (1 - b["completion_mask"])).abs().sum()) == 0.0


def test_the_trainers_logprobs_match_the_samplers_over_a_multi_turn_episode(engine):
    params = SamplingParams(temperature=1.0, max_new_tokens=6, n=1, seed=0)
    envs = [ThreeTurns(None, {"x": x}) for x in range(1, 7)]
    episodes, traces = _episodes(engine, envs, 3, params, list(range(50, 56)))
    assert all(e.turns == 3 for e in episodes)
    rows = [{**_row(t, 1.0), "index": i} for i, t in enumerate(traces)]
    width = max(len(t.token_ids) for t in traces)
    table = old_policy_table(engine.model, rows, width=width, batch_size=4, pad_id=engine.tokenizer.pad_token_id,
                             temperature=1.0, device=torch.device("cpu"))
    gaps = []
    for i, t in enumerate(traces):
        mask = torch.tensor(t.agent_mask, dtype=torch.bool)
        gaps.append((table[i, :len(t.token_ids)][mask] - torch.tensor(t.logprobs)[mask]).abs().max())
    assert max(gaps) < TOLERANCE


def test_observation_tokens_are_what_the_chat_template_puts_between_the_turns(engine):
    tok = engine.tokenizer
    before = [{"role": "user", "content": "Compute 3 + 4"}]
    after = [*before, {"role": "assistant", "content": "calc(3 + 4)"}, {"role": "user", "content": "calc(3 + 4) = 7"}]
    answer = tok("calc(3 + 4)", add_special_tokens=False)["input_ids"]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    full = tok.apply_chat_template(after, tokenize=False, add_generation_prompt=True)
    for ids, reason in ((answer + [end], "stop"), (answer, "length")):
        gen = type("G", (), {"token_ids": ids, "finish_reason": reason})()
        obs = observation_ids(tok, before, after, gen)
        # the first prompt, the sampled answer and the observation's tokens spell the next prompt the template gives
        assert tok.decode(engine.prompt_ids(before) + ids + obs) == full
    with pytest.raises(ValueError, match="does not extend"):
        observation_ids(tok, before, [{"role": "user", "content": "something else"}, *after[1:]], gen)
