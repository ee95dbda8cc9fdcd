"""What shapes a stage's output besides its data, as short hashes recorded in its manifest's `values`.

A stage is stale when something it used changed. For a domain that is more than its seed data
(`Domain.data_fingerprint`):

- `domain_code`: the source of the modules that define the domain (`Domain.code_files`: its class and every
  base class up to `Domain`, plus `code_modules`), so an edited parser, scorer or prompt template counts. Lines
  that hold only a comment, blank lines and trailing spaces do not (a syntax tree would also leave out a comment
  at the end of a line, but parsing a benchmark suite's modules costs `genenv status` 0.2 s). generate-tasks
  (the parser) and score (the scorer) record it.
- `env_prompt`: the environment's prompt rendered for fixed contexts built from the seeds (the first epoch's,
  with no statistics, and a later epoch's, with statistics, a difficulty hint and a frontier example), so a
  prompt that comes from a template file or a suite also counts. generate-tasks records it.
- `agent_prompt`: the agent's prompt rendered for up to `SAMPLED` seeds spread over both splits. rollout
  records it.

A value that a stage's older manifest does not hold is not a change (`staleness.LATE_VALUES`): runs made before
these were recorded stay done.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from genenv_cli.domains.base import Domain, EnvContext, SeedTask

SAMPLED = 8  # seeds whose agent prompts are rendered: enough to reach each branch of a typical template


def _digest(parts: list[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:16]


def _code_lines(text: str) -> str:
    r"""A module's source without the lines that hold only a comment, blank lines and trailing spaces.

    >>> _code_lines("x = 1   \n\n    # why\ny = 2  # how\n") == _code_lines("x = 1\ny = 2  # how")
    True
    """
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


_CACHE: dict[tuple[int, str], tuple[Domain, str]] = {}


def _cached(domain: Domain, what: str, compute: Any) -> str:
    """One computation per domain object and process (the entry holds the object, so its id is never reused)."""
    key = (id(domain), what)
    if key not in _CACHE:
        _CACHE[key] = (domain, compute())
    return _CACHE[key][1]


def code_fingerprint(domain: Domain) -> str:
    """The domain's code: its `code_files`, by module file name and code lines."""
    inner = getattr(domain, "inner", domain)  # a run's imported seeds wrap the registered domain's code

    def compute() -> str:
        return _digest([f"{path.name}\n{_code_lines(path.read_text('utf-8', 'replace'))}" for path in inner.code_files()])

    return _cached(inner, "code", compute)


def sample_seeds(domain: Domain, k: int = SAMPLED) -> list[SeedTask]:
    """Up to `k` seeds, evenly spaced over the train and the validation split (the same ones every time)."""
    seeds = domain.seeds("train") + domain.seeds("validation")
    if len(seeds) <= k:
        return seeds
    return [seeds[i * len(seeds) // k] for i in range(k)]


def fixed_contexts(domain: Domain) -> list[EnvContext]:
    """The contexts the environment's prompt is fingerprinted (and previewed) on: the first training seed with
    nothing known (epoch 1), then with made-up statistics of an earlier epoch, a difficulty hint each way and the
    second seed as a frontier example."""
    train = domain.seeds("train")
    if not train:
        return []
    first = train[0]
    frontier = [train[1].payload] if len(train) > 1 else []
    shapes = sorted({s.shape for s in train})
    stats = {"tasks": len(train), "success_rate": 0.5,
             "per_shape": {shape: {"success_rate": 0.5, "tasks": 1} for shape in shapes},
             "too_easy": 1, "too_hard": 1, "in_band": 1, "frontier_task_ids": [train[1].id] if len(train) > 1 else []}
    return [EnvContext(first.id, first.shape, first.payload, None, None, []),
            EnvContext(first.id, first.shape, first.payload, 0.8, stats, frontier),
            EnvContext(first.id, first.shape, first.payload, 0.2, stats, frontier)]


def _rendered(render: Any, arg: Any) -> str:
    try:
        return json.dumps(render(arg), sort_keys=True, ensure_ascii=False)
    except Exception as exc:  # noqa: BLE001 - a plugin's bug: the stage itself reports it; the hash records it
        return f"error: {type(exc).__name__}"


def env_prompt_fingerprint(domain: Domain) -> str:
    return _cached(domain, "env", lambda: _digest([_rendered(domain.env_messages, c) for c in fixed_contexts(domain)]))


def agent_prompt_fingerprint(domain: Domain) -> str:
    return _cached(domain, "agent", lambda: _digest([_rendered(domain.agent_messages, s.payload)
                                                     for s in sample_seeds(domain)]))


def _joined(domains: dict[str, Domain], value: Any) -> str:
    """One domain's value, or `name:value` of each (a mixed run), as `catalogue.domains.domain_data` writes them."""
    if len(domains) == 1:
        return value(next(iter(domains.values())))
    return ",".join(f"{name}:{value(d)}" for name, d in domains.items())


def generate_values(domains: dict[str, Domain], with_environment: bool = True) -> dict[str, str]:
    """What generate-tasks records besides `domain_data`: the parser's code and, when an environment writes
    tasks (`with_environment`; not in env.mode = "seeds"), its prompt."""
    out = {"domain_code": _joined(domains, code_fingerprint)}
    if with_environment:
        out["env_prompt"] = _joined(domains, env_prompt_fingerprint)
    return out


def rollout_values(domains: dict[str, Domain]) -> dict[str, str]:
    """What rollout records: the agent's prompt."""
    return {"agent_prompt": _joined(domains, agent_prompt_fingerprint)}


def score_values(domains: dict[str, Domain]) -> dict[str, str]:
    """What score records besides `domain_data`: the scorer's code."""
    return {"domain_code": _joined(domains, code_fingerprint)}
