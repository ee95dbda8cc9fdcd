"""The environment's task batches for generate-tasks: n outputs sampled per conditioning context, round after round
until each batch holds n tasks or `generate.max_rounds` runs out. Every output is parsed by the domain (under the
per-item time limit) and checked for exact and near duplicates of everything seen so far; a valid, novel one joins
its batch as a task, anything else goes to the rejects with its reason. Every generation, task or not, becomes a row
of env_generations.parquet with its tokens and sampler logprobs (the group the environment's GRPO update compares).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.ui import UI
from genenv_cli.core.watchdog import ItemTimeout, Watchdog
from genenv_cli.core.watchdog import reason as timeout_reason
from genenv_cli.domains.base import Domain, EnvContext, Reject, jaccard
from genenv_cli.machinery.checkpoints import derive_seed

STAGE = "generate-tasks"  # the stage these batches are written for: their sampling seeds derive from its name


class Novelty:
    """Exact and near-duplicate detection against everything seen so far (the domain defines the keys)."""

    def __init__(self, domain: Domain, threshold: float):
        self.domain = domain
        self.threshold = threshold
        self.exact: dict[str, str] = {}
        self.grams: list[tuple[frozenset, str]] = []

    def add(self, payload: dict[str, Any], task_id: str) -> None:
        self.exact.setdefault(self.domain.exact_key(payload), task_id)
        self.grams.append((self.domain.near_key(payload), task_id))

    def problem(self, payload: dict[str, Any]) -> str | None:
        key = self.domain.exact_key(payload)
        if key in self.exact:
            return f"duplicate of {self.exact[key]}"
        g = self.domain.near_key(payload)
        for other, tid in self.grams:
            if jaccard(g, other) >= self.threshold:
                return f"near duplicate of {tid}"
        return None


def _reject_kind(reason: str) -> str:
    if reason.startswith("parse"):
        return "rejected_parse"
    if "duplicate" in reason:
        return "rejected_duplicate"
    return "rejected_invalid"


@dataclass
class Sampling:
    """What one sampling of environment batches works with (an epoch's, or the static set's), and the tallies
    it adds to: `counts` (generations, accepted, rejected_*, rounds), `rejects` (the rejects file's rows) and
    `generations` (env_generations' rows; None for the static set, which no update learns from)."""

    cfg: Config
    epoch: int          # 0 for the static set
    domain: Domain
    model_name: str     # what to load
    model_tag: str      # what the tasks record
    novelty: Novelty
    variations: int     # n: tasks per batch
    id_prefix: str      # batch ids are `<id_prefix>-b0012`
    ui: UI
    counts: dict[str, Any]
    rejects: list[dict[str, Any]]
    generations: list[dict[str, Any]] | None = None
    per_batch: dict[str, int] = field(default_factory=dict)  # generations recorded so far, by batch


def open_env_engine(cfg: Config, epoch: int, model_name: str, model_tag: str, ui: UI) -> Any:
    from genenv_cli.machinery.engines import open_run_engine
    from genenv_cli.machinery.models import resolve

    ui.info(f"generate-tasks epoch {epoch}: loading environment model {model_tag}")
    with ui.working(f"generate-tasks e{epoch}: loading environment model {model_tag}"):
        return open_run_engine(resolve(model_name, tag=model_tag), cfg, batch_size=cfg.generate.batch_size)


def sample_batches(s: Sampling, contexts: list[EnvContext], wanted: int, shared: Any = None) -> list[dict[str, Any]]:
    """Sample n outputs per context, round after round, until each batch holds n tasks or rounds run out.
    `shared`: an engine already open (a mixed run's, closed by its owner); None opens and closes one here."""
    from genenv_cli.machinery.engines import SamplingParams

    cfg, epoch, variations, counts, ui = s.cfg, s.epoch, s.variations, s.counts, s.ui
    g = cfg.generate
    engine = shared or open_env_engine(cfg, epoch, s.model_name, s.model_tag, ui)
    accepted: list[list[dict[str, Any]]] = [[] for _ in contexts]
    messages = [s.domain.env_messages(c) for c in contexts]
    try:
        for rnd in range(g.max_rounds):
            need = {i: variations - len(accepted[i]) for i in range(len(contexts))
                    if len(accepted[i]) < variations}
            total_have = sum(len(a) for a in accepted)
            if not need or total_have >= wanted:
                break
            counts["rounds"] = rnd + 1
            by_n: dict[int, list[int]] = {}
            for i, n in need.items():
                by_n.setdefault(n, []).append(i)
            for n, idxs in sorted(by_n.items()):
                params = SamplingParams(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.max_new_tokens,
                                        n=n, seed=derive_seed(cfg.run.seed, STAGE, epoch, rnd, n))
                with ui.progress(f"generate-tasks e{epoch} round {rnd + 1}", len(idxs) * n, "gens") as bar:
                    outs = engine.generate([messages[i] for i in idxs], params,
                                           on_progress=lambda s, t: bar.advance(s, tokens=t))
                for i, gens in zip(idxs, outs, strict=True):
                    for gen in gens:
                        counts["generations"] += 1
                        counts["truncated"] += gen.finish_reason == "length"
                        batch_id = f"{s.id_prefix}-b{i:04d}"
                        reason = _accept(s, batch_id, contexts[i], messages[i], gen.text, accepted[i])
                        if s.generations is not None:
                            s.generations.append(_generation_record(s, batch_id, contexts[i], messages[i], gen,
                                                                    rnd + 1, accepted[i], reason, params))
    finally:
        if shared is None:
            engine.close()
    tasks = [t for batch in accepted for t in batch]
    if len(tasks) > wanted:  # the last batch's tail has no room in the epoch: those generations became no task
        dropped = {t["task_id"] for t in tasks[wanted:]}
        for rec in s.generations or []:
            if rec["task_id"] in dropped:
                rec["task_id"], rec["reason"] = None, "surplus: the epoch's tasks were already written"
        tasks = tasks[:wanted]
    return tasks


def _generation_record(s: Sampling, batch_id: str, ctx: EnvContext, messages: list[dict[str, str]], gen: Any,
                       rnd: int, batch: list[dict[str, Any]], reason: str | None, params: Any) -> dict[str, Any]:
    """One row of env_generations.parquet: the generation with its tokens, and the task it became (the batch's
    newest, when `_accept` took it) or why it became none."""
    index = s.per_batch.get(batch_id, 0)
    s.per_batch[batch_id] = index + 1
    return {"generation_id": f"{batch_id}/g{index}", "batch_id": batch_id, "domain": s.domain.name,
            "parent_id": ctx.parent_id, "round": rnd, "prompt": json.dumps(messages, ensure_ascii=False),
            "prompt_token_ids": list(gen.prompt_token_ids), "output": gen.text,
            "completion_token_ids": list(gen.token_ids), "logprobs": [float(x) for x in gen.logprobs],
            "finish_reason": gen.finish_reason, "temperature": float(params.temperature), "top_p": float(params.top_p),
            "env_model": s.model_tag, "task_id": batch[-1]["task_id"] if reason is None else None, "reason": reason}


def _accept(s: Sampling, batch_id: str, ctx: EnvContext, messages: list[dict[str, str]], text: str,
            batch: list[dict[str, Any]]) -> str | None:
    """Parse one generation; a valid, novel task joins `batch` (None), anything else goes to the rejects (its
    reason)."""
    domain, novelty, counts = s.domain, s.novelty, s.counts
    try:
        if len(batch) >= s.variations:
            raise Reject("surplus: the batch is already full")
        try:
            with Watchdog(s.cfg.score.item_timeout_s) as dog:  # a parser past the limit: a rejected generation
                dog.arm()
                payload, shape = domain.parse_env_output(text, ctx)
                dog.disarm()
        except ItemTimeout:
            raise Reject(f"parse: {timeout_reason(s.cfg.score.item_timeout_s)}") from None
        except (ValueError, RecursionError, OverflowError) as exc:  # a plugin's parser choking on degenerate text
            raise Reject(f"parse: unreadable output ({type(exc).__name__})") from None
        dup = novelty.problem(payload)
        if dup:
            raise Reject(dup)
    except Reject as exc:
        reason = str(exc)
        if not reason.startswith("surplus"):
            counts[_reject_kind(reason)] += 1
        s.rejects.append({"batch_id": batch_id, "domain": domain.name, "parent_id": ctx.parent_id, "reason": reason,
                          "env_output": text})
        return reason
    tid = f"{batch_id}-v{len(batch)}"
    novelty.add(payload, tid)
    counts["accepted"] += 1
    batch.append({"task_id": tid, "epoch": s.epoch, "batch_id": batch_id, "source": "env",
                  "domain": domain.name, "shape": shape, "payload": payload, "parent_id": ctx.parent_id,
                  "context": ctx.to_json(), "env_prompt": messages, "env_output": text,
                  "env_model": s.model_tag})
    return None
