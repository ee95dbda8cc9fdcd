"""A task's success rate from one teacher-forced forward pass, instead of K sampled rollouts
(`curriculum.p_estimator = "teacher_forced"`, docs/curriculum.md).

The estimate is the probability that the agent, sampling with the rollout's settings (temperature, top-p,
max_new_tokens), writes the domain's reference answer (`Domain.reference_completion`) token for token and then ends
its turn: the product over the answer's tokens of each token's probability under the sampling distribution (the
logits divided by the temperature, then cut to the top-p nucleus and renormalised, as the engines sample), times the
probability of an end-of-turn token after the last one. A token outside the nucleus has probability 0, so the
estimate is then 0. When the answer fills max_new_tokens exactly, the completion ends there without an end token;
when it is longer, it cannot be written and the estimate is 0. At temperature 0 (greedy) the estimate is 1 when
every token of the answer and then an end token is the argmax, else 0.

It is exact for the event "the completion is the reference answer" (up to other tokenizations of the same text, which
a model rarely samples). It equals the success rate when that answer is the only completion the scorer accepts; a
domain whose scorer accepts other forms (arith reads "592", "Answer: 592." or "the answer is 592" as right) gets a
lower bound, and says so (`Domain.teacher_forced`).

>>> from genenv_cli.machinery.teacher_forced import answer_length_factor
>>> answer_length_factor(3, 16), answer_length_factor(16, 16), answer_length_factor(17, 16)
('end', 'none', 'impossible')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

SUPPORT = ("exact", "lower_bound")  # what a domain may declare in `teacher_forced` ("" where it has no reference)


def answer_length_factor(answer_tokens: int, max_new_tokens: int) -> str:
    """How the completion must end after an answer of `answer_tokens` tokens: with an end token (`end`), at the
    token limit with nothing more (`none`), or not at all, the answer being longer than the limit (`impossible`)."""
    if answer_tokens < max_new_tokens:
        return "end"
    return "none" if answer_tokens == max_new_tokens else "impossible"


def sampling_logprobs(scores: Any, temperature: float, top_p: float) -> Any:
    """Log-probabilities of the next token under the sampling settings, rows of `scores` (N, V) being logits: the
    engines' own warpers (transformers' temperature and top-p), then a log-softmax. Greedy (temperature 0) gives 0
    for each row's argmax and -inf elsewhere."""
    import torch
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    scores = scores.float()
    if temperature == 0.0:
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(1, scores.argmax(-1, keepdim=True), 0.0)
    if temperature != 1.0:
        scores = TemperatureLogitsWarper(temperature)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.log_softmax(scores, dim=-1)


def answer_logprobs(model: Any, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]],
                    eos_ids: Sequence[int], *, temperature: float, top_p: float, max_new_tokens: int,
                    pad_id: int = 0, batch_size: int = 16) -> list[float]:
    """log P(the completion is `answers[i]`, then ends) for each prompt i (token ids, the chat template applied),
    from one forward pass over prompt + answer per row, right-padded in batches of `batch_size`. -inf where the
    answer cannot be sampled (a token outside the nucleus, or longer than max_new_tokens)."""
    import torch

    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    device = next(model.parameters()).device
    eos = torch.tensor(sorted(set(eos_ids)), device=device)
    out: list[float] = [float("-inf")] * len(prompts)
    todo = [i for i in range(len(prompts)) if answer_length_factor(len(answers[i]), max_new_tokens) != "impossible"]
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        seqs = [list(prompts[i]) + list(answers[i]) for i in rows]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        for r, s in enumerate(seqs):
            ids[r, :len(s)] = torch.tensor(s, device=device)
            mask[r, :len(s)] = 1
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask).logits
            for r, i in enumerate(rows):
                p, a = len(prompts[i]), len(answers[i])
                # the logits at position t predict token t + 1: the answer's tokens, then what follows the answer
                lp = sampling_logprobs(logits[r, p - 1:p + a], temperature, top_p)
                total = float(lp[torch.arange(a, device=device), torch.tensor(list(answers[i]), device=device)].sum()) \
                    if a else 0.0
                if answer_length_factor(a, max_new_tokens) == "end":
                    total += float(torch.logsumexp(lp[a, eos], dim=0))
                out[i] = total if not math.isnan(total) else float("-inf")
    return out


def reference_ids(tokenizer: Any, text: str) -> list[int]:
    """The reference answer's tokens as the tokenizer writes the text (no special tokens added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def task_probabilities(model: Any, tokenizer: Any, eos_ids: Sequence[int], domains: dict[str, Any],
                       tasks: Sequence[dict[str, Any]], *, temperature: float, top_p: float, max_new_tokens: int,
                       batch_size: int = 16) -> list[float | None]:
    """The teacher-forced p of each task (a tasks.jsonl row: `domain`, `payload`): the probability above, or None for
    a task whose domain declares no reference answer (`Domain.teacher_forced` empty) or gives none for the task."""
    idx, prompts, answers = [], [], []
    for j, t in enumerate(tasks):
        d = domains[t["domain"]]
        ref = d.reference_completion(t["payload"]) if getattr(d, "teacher_forced", "") in SUPPORT else None
        if ref is None:
            continue
        text = tokenizer.apply_chat_template(d.agent_messages(t["payload"]), tokenize=False, add_generation_prompt=True)
        idx.append(j)
        prompts.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        answers.append(reference_ids(tokenizer, ref))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else sorted(eos_ids)[0]
    lps = answer_logprobs(model, prompts, answers, eos_ids, temperature=temperature, top_p=top_p,
                          max_new_tokens=max_new_tokens, pad_id=pad, batch_size=batch_size)
    out: list[float | None] = [None] * len(tasks)
    for j, lp in zip(idx, lps, strict=True):
        out[j] = math.exp(lp)
    return out
