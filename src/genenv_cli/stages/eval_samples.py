"""A model on a benchmark's samples: the samples loaded, each answered (one batched call, or an episode played)
and scored with the benchmark's metric, and the result's record and sample rows. `genenv evaluate`
(`actions/evaluate.py`) and the eval-agent stage (`stages/eval_agent.py`) both evaluate with these, so their
results are alike."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.errors import GenenvError, InputError
from genenv_cli.core.paths import cache_dir
from genenv_cli.core.sizecaps import DATA, scan_source
from genenv_cli.core.ui import UI
from genenv_cli.core.version import __version__
from genenv_cli.domains.seedfiles import domains_for_run
from genenv_cli.evals.base import CONTEXT_OVERFLOW, Benchmark, EvalSample, Verdict
from genenv_cli.machinery.episodes import overflow_reason
from genenv_cli.rundir import RunDir

HEADLINE_ORDER = ("accuracy", "success_rate", "em")


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's headline number: the summary's own `headline` key, else the first of accuracy,
    success_rate, em in its overall block."""
    overall = summary.get("overall", {})
    name = summary.get("headline")
    if not isinstance(name, str) or name not in overall:
        name = next((k for k in HEADLINE_ORDER if k in overall), None)
    return {"name": name, "value": overall.get(name) if name else None}



def result_record(bench: Benchmark, bench_name: str, samples: list[EvalSample], verdicts: list[Verdict], notes: list[str | None],
                  cfg: Config, *, loaded: Any, tag: str, epoch: int | None, protocol: str, split: str | None,
                  model_info: dict[str, Any], sampling: dict[str, Any] | None, limit: int | None,
                  label: str | None = None, missing: int = 0) -> dict[str, Any]:
    """The result file's record of an evaluation (`RUN/evals/<bench>/<tag>.json`; eval-agent's is the same)."""
    summary = bench.summarize(samples, verdicts, protocol)
    return {
        "bench": bench_name, "model_tag": tag, "epoch": epoch, "protocol": protocol, "split": split,
        "version": loaded.version, "data_source": loaded.source, "data_fingerprint": loaded.fingerprint,
        "n": len(samples), "headline": headline(summary), "summary": summary, "model": model_info,
        "sampling": sampling, "config": {"evaluate": cfg.section("evaluate"), "engine": cfg.run.engine,
                                         "dtype": cfg.run.dtype, "limit": limit, "seed": cfg.run.seed},
        "label": label,
        "counts": {"samples": len(samples), "correct": sum(v.correct for v in verdicts),
                   "missing_predictions": missing,
                   "too_long": sum(n == "too long" for n in notes),
                   "context_overflow": sum(v.end == CONTEXT_OVERFLOW for v in verdicts)},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "genenv_version": __version__,
    }


def sample_rows(samples: list[EvalSample], outputs: list[str], verdicts: list[Verdict],
                notes: list[str | None]) -> list[dict[str, Any]]:
    """The samples file's rows: one per sample, its output, verdict and scores."""
    return [{"id": s.id, "category": s.category, "output": o, "parsed": v.parsed, "correct": v.correct,
             "reason": v.reason or (n or ""), "scores": v.scores, **({"end": v.end} if v.end else {})}
            for s, o, v, n in zip(samples, outputs, verdicts, notes, strict=True)]



def load_samples(run: RunDir | None, cfg: Config, bench: Benchmark, bench_name: str, data: Path | None,
                 split: str | None, version: str | None, protocol: str,
                 limit: int | None) -> tuple[Any, list[EvalSample]]:
    """(the suite's loaded data, the samples evaluated: the first `limit` when given)."""
    root = run.root if run is not None else None
    bench.configure(cfg, root, domains=domains_for_run(cfg, root) if bench.uses_run_domains else None)
    if data is not None and data.exists():
        scan_source(data, DATA, "--data")  # the size caps, in one linear pass, before the suite reads a byte
    loaded = bench.load(data=data, split=split, version=version, protocol=protocol,
                        cache_dir=cache_dir() / "benchmarks" / bench_name)
    samples = loaded.samples[:limit] if limit else loaded.samples
    if not samples:
        raise InputError(f"{bench_name}: no samples to evaluate ({loaded.source}, split {split or 'default'}).")
    return loaded, samples



def answer_length(bench: Benchmark, cfg: Config) -> int:
    """New tokens per answer: evaluate.max_new_tokens, or (0, its default) what the benchmark needs."""
    return cfg.evaluate.max_new_tokens or bench.needed_tokens(cfg)



def score_safely(bench: Benchmark, sample: EvalSample, output: str, protocol: str,
                 limit: float = ITEM_TIMEOUT_S) -> Verdict:
    """The benchmark's verdict; a scorer that raises on a degenerate output, or runs past `limit` seconds
    (score.item_timeout_s; the built-in parsers are bounded, this is the net under them), gives the empty answer's
    verdict with the reason, so one sample never costs or stalls the whole evaluation (watchdog.py). A GenenvError
    is a data error (the benchmark's files, not the model's text) and stops the evaluation with its message."""
    from genenv_cli.core.watchdog import ItemTimeout, Watchdog, reason

    limit += getattr(bench, "engine_seconds", 0.0)  # a game engine's own time (ALFWorld's replay) is not the model text's
    with Watchdog(limit) as dog:
        try:
            dog.arm()
            verdict = bench.score(sample, output, protocol)
            dog.disarm()
            return verdict
        except ItemTimeout:
            why = reason(limit)
        except GenenvError:  # the benchmark's data is damaged (a database file, a record): an input error, not a score
            dog.disarm()
            raise
        except Exception as exc:  # noqa: BLE001 - model output is data: whatever it holds, it is a wrong answer
            dog.disarm()
            why = f"unscorable output: the scorer raised {type(exc).__name__}: {str(exc)[:200]}"
        try:
            dog.arm()
            verdict = bench.score(sample, "", protocol)
            dog.disarm()
        except ItemTimeout:
            verdict = Verdict(False, None, why)
    verdict.correct = False
    verdict.reason = why
    return verdict



def turn_cap(bench: Benchmark, max_steps: int) -> int:
    """The most turns an episode of `bench` plays: its run's domains' `max_turns` for the held-out suite, else the
    step limit (`evaluate.max_steps`)."""
    domains = getattr(bench, "domains", None) if bench.uses_run_domains else None
    return max((d.max_turns for d in (domains or {}).values()), default=max_steps)


def generate(bench: Benchmark, samples: list[EvalSample], cfg: Config, name: str, tag: str, protocol: str,
             ui: UI) -> tuple[list[str], list[Verdict], list[str | None], dict[str, Any], dict[str, Any]]:
    """Every sample answered by the model `name` and scored: the single-turn ones in one batched call (a prompt
    that would not fit the model's context is not sent), the interactive ones played as episodes. Returns
    (outputs, verdicts, notes, sampling, the model's identity)."""
    from genenv_cli.machinery.engines import SamplingParams

    settings = cfg.evaluate
    max_new = answer_length(bench, cfg)
    ref, engine = _open_model(name, tag, bench, cfg, ui)
    params = SamplingParams(temperature=settings.temperature, top_p=1.0, max_new_tokens=max_new, n=1,
                            seed=cfg.run.seed)
    outputs: list[str] = [""] * len(samples)
    verdicts: list[Verdict | None] = [None] * len(samples)
    notes: list[str | None] = [None] * len(samples)
    episode_stats: dict[str, int] = {}
    try:
        episodic = [i for i, s in enumerate(samples) if bench.interactive and (not s.messages or s.meta.get("episode")
                                                                                 or s.messages[-1]["role"] != "user")]
        single = [i for i in range(len(samples)) if i not in set(episodic)]
        answered = (outputs, verdicts, notes)
        _answer_single_turns(bench, samples, single, engine, params, protocol, cfg, ui, answered)
        if episodic:
            _play_episodes(bench, samples, episodic, engine, params, settings.max_steps, ui, answered, episode_stats)
    finally:
        engine.close()
    sampling = {"temperature": settings.temperature, "max_new_tokens": max_new, "seed": cfg.run.seed,
                "engine": engine.name}
    if episode_stats.get("prompt_tokens"):  # the episodes' prompt tokens and the share kept from earlier turns
        sampling |= {"episode_prompt_tokens": episode_stats["prompt_tokens"],
                     "episode_cache_hit_rate": round(episode_stats["cached_tokens"] / episode_stats["prompt_tokens"], 4)}
    return outputs, verdicts, notes, sampling, ref.identity()  # type: ignore[return-value]


def _open_model(name: str, tag: str, bench: Benchmark, cfg: Config, ui: UI) -> tuple[Any, Any]:
    """(the model's reference, its engine opened with the run's settings)."""
    from genenv_cli.machinery.engines import open_run_engine
    from genenv_cli.machinery.models import resolve

    ui.info(f"evaluate {bench.name}: loading {tag}")
    with ui.working(f"evaluate {bench.name}: loading {tag}"):  # the embedded model converts once, on first use
        ref = resolve(name, tag=tag)
        engine = open_run_engine(ref, cfg, batch_size=cfg.evaluate.batch_size)
    return ref, engine


def _answer_single_turns(bench: Benchmark, samples: list[EvalSample], single: list[int], engine: Any, params: Any,
                         protocol: str, cfg: Config, ui: UI, answered: tuple[list, list, list]) -> None:
    """The single-turn samples (indices `single`) generated in one call and scored, into `answered`'s (outputs,
    verdicts, notes); a prompt too long for the context is not sent and fails as a context overflow."""
    outputs, verdicts, notes = answered
    max_new = params.max_new_tokens
    context = _context_limit(engine)
    limit = context - max_new
    lengths: dict[int, int] = {}
    fits = []
    for i in single:
        if context > 0 and (n := len(engine.prompt_ids(samples[i].messages))) > limit:
            notes[i], lengths[i] = "too long", n
        else:
            fits.append(i)
    if len(fits) < len(single):
        ui.warn(f"{len(single) - len(fits)} prompts are longer than the model's context ({limit} tokens left for "
                f"the prompt); they count as failures (\"end\": \"{CONTEXT_OVERFLOW}\" in the samples file)")
    with ui.progress(f"evaluate {bench.name}", len(fits), "samples") as bar:
        gens = engine.generate([samples[i].messages for i in fits], params,
                               on_progress=lambda s, t: bar.advance(s, tokens=t))
    for i, g in zip(fits, gens, strict=True):
        outputs[i] = g[0].text
    for i in single:
        verdicts[i] = v = score_safely(bench, samples[i], outputs[i], protocol, cfg.score.item_timeout_s)
        if notes[i]:   # never sent: a failure whatever the empty answer would score (BFCL irrelevance: right)
            v.correct, v.end = False, CONTEXT_OVERFLOW
            v.reason = overflow_reason(lengths[i], max_new, context)
            v.scores = {k: 0.0 for k in v.scores}


def _play_episodes(bench: Benchmark, samples: list[EvalSample], episodic: list[int], engine: Any, params: Any,
                   max_steps: int, ui: UI, answered: tuple[list, list, list], episode_stats: dict[str, int]) -> None:
    """The interactive samples (indices `episodic`) played together as episodes (the episode engine), each
    episode's answers joined as its output in `answered`; `episode_stats` gains the engine's token counts."""
    from genenv_cli.core.progress import EpisodeProgress
    from genenv_cli.machinery.episodes import play_episodes

    outputs, verdicts, _ = answered
    context = _context_limit(engine)
    with ui.progress(f"evaluate {bench.name} episodes", len(episodic), "episodes") as bar:
        turns = EpisodeProgress(bar, turn_cap(bench, max_steps))
        played = play_episodes(bench, [samples[i] for i in episodic], engine, params, max_steps,
                               context_limit=context, on_done=turns.on_done, on_turn=turns.on_turn,
                               stats=episode_stats)
    for i, (transcript, verdict) in zip(episodic, played, strict=True):
        verdicts[i] = verdict
        outputs[i] = "\n".join(m["content"] for m in transcript if m["role"] == "assistant")
    ended = sum(v.end == CONTEXT_OVERFLOW for _, v in played)
    if ended:
        ui.warn(f"{ended} of {len(episodic)} episodes outgrew the model's context ({context} tokens with "
                f"{params.max_new_tokens} for the answer); they count as failures "
                f'("end": "{CONTEXT_OVERFLOW}" in the samples file)')


def _context_limit(engine: Any) -> int:
    """The engine's own limit (the hf model's max_position_embeddings, vLLM's max_model_len); 0 when unknown."""
    limit = getattr(engine, "context_limit", None)
    return int(limit()) if callable(limit) else 0
