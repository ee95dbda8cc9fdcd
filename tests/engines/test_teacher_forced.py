"""The teacher-forced estimate (machinery/teacher_forced.py) against the product of per-token sampling probabilities
computed here independently (a forward pass per prefix, softmax of logits / T, the top-p nucleus cut by sorting), and
against the engine's own record of the tokens it sampled."""

import math

import pytest
import torch

from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve
from genenv_cli.machinery.teacher_forced import answer_logprobs, task_probabilities

CONV = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "Compute 12 + 7"}]


@pytest.fixture(scope="module")
def engine(tiny_model):
    return HFEngine(resolve(str(tiny_model)), batch_size=4)


def nucleus_probs(logits: list[float], temperature: float, top_p: float) -> list[float]:
    """The sampling distribution written out: softmax(logits / T), then the most probable tokens kept until their
    mass reaches top_p (the one that crosses it included), renormalised; greedy puts all mass on the argmax."""
    if temperature == 0.0:
        top = max(range(len(logits)), key=lambda i: logits[i])
        return [1.0 if i == top else 0.0 for i in range(len(logits))]
    m = max(x / temperature for x in logits)
    ex = [math.exp(x / temperature - m) for x in logits]
    z = sum(ex)
    p = [e / z for e in ex]
    if top_p >= 1.0:
        return p
    keep, mass = set(), 0.0
    for i in sorted(range(len(p)), key=lambda i: -p[i]):
        keep.add(i)
        mass += p[i]
        if mass >= top_p:
            break
    z = sum(p[i] for i in keep)
    return [p[i] / z if i in keep else 0.0 for i in range(len(p))]


def by_hand(model, prompt: list[int], answer: list[int], eos: list[int], temperature: float, top_p: float,
            max_new_tokens: int) -> float:
    """P(answer, then an end token) from one forward pass per prefix (no batching, no padding)."""
    if len(answer) > max_new_tokens:
        return 0.0
    prob, ids = 1.0, list(prompt)
    for t in [*answer, None]:
        if t is None and len(answer) == max_new_tokens:
            break
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].double().tolist()
        dist = nucleus_probs(logits, temperature, top_p)
        if t is None:
            prob *= sum(dist[e] for e in eos)
        else:
            prob *= dist[t]
            ids.append(t)
    return prob


SETTINGS = [(1.0, 1.0), (0.7, 1.0), (1.0, 0.9), (1.4, 0.8)]


@pytest.mark.parametrize("temperature,top_p", SETTINGS)
def test_it_is_the_product_of_the_sampling_probabilities(engine, temperature, top_p):
    gens = engine.generate([CONV], SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=6, n=3,
                                                  seed=5))[0]
    prompt = gens[0].prompt_token_ids
    positive = 0
    for g in gens:
        for cut in (1, 3):  # the sampled tokens' first `cut`, then an end token
            answer = g.token_ids[:cut]
            got = answer_logprobs(engine.model, [prompt], [answer], engine.eos_ids, temperature=temperature,
                                  top_p=top_p, max_new_tokens=6)[0]
            want = by_hand(engine.model, prompt, answer, engine.eos_ids, temperature, top_p, 6)
            if want == 0.0:  # the end token outside the nucleus: both say so exactly
                assert got == float("-inf")
            else:
                positive += 1
                assert got == pytest.approx(math.log(want), abs=1e-4)
        # a completion that fills max_new_tokens ends there: its probability is the engine's own record of it
        if len(g.token_ids) == 6 and g.token_ids[-1] not in engine.eos_ids:
            got = answer_logprobs(engine.model, [prompt], [g.token_ids], engine.eos_ids, temperature=temperature,
                                  top_p=top_p, max_new_tokens=6)[0]
            assert got == pytest.approx(sum(g.logprobs), abs=1e-4)
    assert positive >= 1


def test_temperature_and_top_p_change_it_as_the_sampler_would(engine):
    prompt = engine.prompt_ids(CONV)
    answer = engine.generate([CONV], SamplingParams(temperature=1.0, max_new_tokens=3, seed=2))[0][0].token_ids[:2]
    seen = set()
    for temperature, top_p in [(1.0, 1.0), (0.5, 1.0), (2.0, 1.0), (1.0, 0.95)]:
        got = answer_logprobs(engine.model, [prompt], [answer], engine.eos_ids, temperature=temperature,
                              top_p=top_p, max_new_tokens=8)[0]
        want = by_hand(engine.model, prompt, answer, engine.eos_ids, temperature, top_p, 8)
        assert got == pytest.approx(math.log(want), abs=1e-4)
        seen.add(round(got, 3))
    assert len(seen) == 4  # each setting gives its own probability


def test_a_token_outside_the_nucleus_or_past_the_limit_has_probability_zero(engine):
    prompt = engine.prompt_ids(CONV)
    with torch.no_grad():
        logits = engine.model(torch.tensor([prompt])).logits[0, -1]
    rare = int(logits.argmin())
    inf = float("-inf")
    assert answer_logprobs(engine.model, [prompt], [[rare]], engine.eos_ids, temperature=1.0, top_p=0.5,
                           max_new_tokens=8) == [inf]
    assert answer_logprobs(engine.model, [prompt], [[rare]], engine.eos_ids, temperature=1.0, top_p=1.0,
                           max_new_tokens=8)[0] > inf
    assert answer_logprobs(engine.model, [prompt], [[rare] * 3], engine.eos_ids, temperature=1.0, top_p=1.0,
                           max_new_tokens=2) == [inf]


def test_greedy_is_one_for_the_greedy_answer_and_zero_for_another(engine):
    prompt = engine.prompt_ids(CONV)
    greedy = engine.generate([CONV], SamplingParams(temperature=0.0, max_new_tokens=4))[0][0].token_ids
    assert greedy[-1] not in engine.eos_ids  # the untaught tiny model runs to the limit
    assert answer_logprobs(engine.model, [prompt], [greedy], engine.eos_ids, temperature=0.0, top_p=1.0,
                           max_new_tokens=4) == [0.0]
    other = [*greedy[:-1], (greedy[-1] + 1) % len(engine.tokenizer)]
    assert answer_logprobs(engine.model, [prompt], [other], engine.eos_ids, temperature=0.0, top_p=1.0,
                           max_new_tokens=4) == [float("-inf")]


def test_batches_and_padding_do_not_change_it(engine):
    convs = [CONV, [{"role": "user", "content": "Compute 3 * 4 + 100"}], [{"role": "user", "content": "Hi"}]]
    prompts = [engine.prompt_ids(c) for c in convs]
    answers = [[5, 6, 7], [9], [11, 12]]
    one = [answer_logprobs(engine.model, [p], [a], engine.eos_ids, temperature=0.8, top_p=0.9, max_new_tokens=8)[0]
           for p, a in zip(prompts, answers, strict=True)]
    batched = answer_logprobs(engine.model, prompts, answers, engine.eos_ids, temperature=0.8, top_p=0.9,
                              max_new_tokens=8, pad_id=engine.pad_id, batch_size=3)
    assert batched == pytest.approx(one, abs=1e-4)


def test_tasks_of_a_domain_without_a_reference_get_none(engine):
    from genenv_cli.catalogue.domains import get_domain

    arith, calc = get_domain("arith"), get_domain("calc")
    tasks = [{"domain": "arith", "payload": {"expression": "12 + 7", "answer": 19}},
             {"domain": "calc", "payload": {"expression": "12 + 7", "answer": 19}}]
    got = task_probabilities(engine.model, engine.tokenizer, engine.eos_ids, {"arith": arith, "calc": calc}, tasks,
                             temperature=1.0, top_p=1.0, max_new_tokens=16)
    prompt = engine.prompt_ids(arith.agent_messages(tasks[0]["payload"]))
    answer = engine.tokenizer("Answer: 19", add_special_tokens=False)["input_ids"]
    assert got[0] == pytest.approx(by_hand(engine.model, prompt, answer, engine.eos_ids, 1.0, 1.0, 16), rel=1e-4)
    assert got[1] is None
    assert arith.teacher_forced == "lower_bound" and calc.teacher_forced == ""

