"""eval-agent: the epoch's agent on the run's held-out set and named benchmarks, as the last stage of the epoch.

    genenv eval-agent --epoch 3

At the end of every `run.eval_every`-th epoch (default: every epoch) it evaluates the agent that epoch trained
(`epochs/N/agent/`; the base agent when `agent.mode = "frozen"`) on each of `run.eval_benches` (default: heldout,
the run's domains on their validation seeds, which training never sees), `run.eval_limit` items of each (default
32, spread evenly over the set; 0: all), with `genenv evaluate`'s prompts, sampling (`[evaluate]`) and scorers.
On the other epochs, or with `run.eval_every = 0`, it completes with nothing to do, so every epoch has the same
stages.

Writes `epochs/N/evals/<bench>.json` (the result `genenv evaluate` writes, with `"stage": "eval-agent"`) and
`<bench>.samples.jsonl` beside it, committed with the manifest like any stage's outputs. Its numbers go into
metrics.json (`heldout_success`, a fraction as `success_rate` is, and `evals`: bench -> headline score), so into
the trackers (`epoch/heldout_success`, `epoch/evals/<bench>`), `status`, the report and `genenv compare`.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import domain_data
from genenv_cli.catalogue.suites import stage_benchmark
from genenv_cli.core.errors import InputError
from genenv_cli.core.ui import UI
from genenv_cli.domains.fingerprints import rollout_values, score_values
from genenv_cli.domains.seedfiles import domains_for_run
from genenv_cli.machinery.checkpoints import AGENT_STAGE, agent_model_for, agent_trained
from genenv_cli.rundir import RunDir, fingerprint, json_bytes, read_pruned, write_new
from genenv_cli.rundir.checkpoint_records import checkpoint_usable, pruned_fingerprint
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging, check_state, execute
from genenv_cli.rundir.datafiles import write_jsonl
from genenv_cli.rundir.evalfiles import model_tag

STAGE = "eval-agent"
PROTOCOL = "official"
HELDOUT = "heldout"
CONFIG_SECTIONS = ["run.domain", "run.domains", "run.seed", "run.eval_benches", "run.eval_limit", "evaluate",
                   "rollout.max_new_tokens", "curriculum.success_threshold"]


def due(cfg: Config, epoch: int) -> bool:
    """Whether the epoch is one run.eval_every evaluates at."""
    every = cfg.run.eval_every
    return every > 0 and epoch % every == 0 and bool(cfg.run.eval_benches)


def _not_due(cfg: Config, epoch: int) -> str:
    if cfg.run.eval_every == 0 or not cfg.run.eval_benches:
        return "run.eval_every = 0" if cfg.run.eval_every == 0 else "run.eval_benches is empty"
    return f"run.eval_every = {cfg.run.eval_every}: epoch {epoch} is not evaluated"


def pruned(run_dir: RunDir, cfg: Config, epoch: int) -> bool:
    """Whether the agent epoch N trained was deleted by run.keep_checkpoints (pruned.json records it), so that
    settings changed since cannot evaluate it again: the stage then says so instead of stopping the run."""
    folder = run_dir.checkpoint_dir(epoch, "agent")
    return (agent_trained(cfg) and pruned_fingerprint(read_pruned(run_dir, epoch), run_dir.rel(folder)) is not None
            and not checkpoint_usable(run_dir, folder))


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    if not due(cfg, epoch):  # no model, no config: a changed schedule that still skips this epoch changes nothing
        return StagePlan(STAGE, epoch, values={"due": False})
    p = _plan(run_dir, cfg, epoch)
    if pruned(run_dir, cfg, epoch) and check_state(run_dir, cfg, p).state != "done":
        # to be evaluated anew (new settings) after its checkpoint went: nothing to load, and it says so
        return StagePlan(STAGE, epoch, values={"due": True, "agent_pruned": True})
    return p


def _plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS, values={"due": True})
    p.requires.append((epoch, AGENT_STAGE))
    name, tag, manifest = agent_model_for(run_dir, cfg, epoch + 1, STAGE)  # what epoch N trained: N+1's start
    p.models["agent"] = (name, tag)
    p.values["agent_model"] = tag
    if manifest is not None:
        p.inputs["agent_checkpoint"] = manifest
    if HELDOUT in cfg.run.eval_benches:  # the held-out items are the domains' seeds, prompted and scored by them
        domains = domains_for_run(cfg, run_dir.root)
        p.values.update({"domain_data": domain_data(domains), **rollout_values(domains), **score_values(domains)})
    for bench in cfg.run.eval_benches:
        result, samples = run_dir.epoch_eval_paths(epoch, bench)
        p.outputs[bench] = result
        p.outputs[f"{bench}.samples"] = samples
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    if counts.get("skipped"):
        return f"not evaluated ({counts['skipped']})"
    parts = []
    for bench, numbers in (counts.get("by_bench") or {}).items():
        value = (metrics.get("evals") or {}).get(bench)
        shown = f"{value:.1f}" if isinstance(value, int | float) else "n/a"
        parts.append(f"{bench} {shown} ({numbers.get('correct')} of {numbers.get('samples')} right)")
    return "; ".join(parts) or "nothing evaluated"


def spread(items: list[Any], limit: int) -> list[Any]:
    """`limit` items spread evenly over `items` (every one when limit is 0 or not below their number), so a set
    ordered by shape is sampled across its shapes.

    >>> spread(list(range(10)), 4)
    [0, 2, 5, 7]
    """
    n = len(items)
    if limit <= 0 or limit >= n:
        return list(items)
    return [items[i * n // limit] for i in range(limit)]


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    ui = ui or UI(quiet=True)

    def body(out: Staging) -> None:
        if not due(cfg, epoch):
            out.counts.update({"samples": 0, "skipped": _not_due(cfg, epoch)})
            return
        if out.plan.values.get("agent_pruned"):
            out.counts.update({"samples": 0, "skipped": f"epoch {epoch}'s agent checkpoint was pruned by "
                                                        f"run.keep_checkpoints before it was evaluated"})
            ui.warn(f"eval-agent epoch {epoch}: not evaluated, {out.counts['skipped']} (`genenv update-agent --epoch "
                    f"{epoch} --force` recreates it)")
            return
        name, tag = out.plan.models["agent"]
        tag = f"epoch-{epoch:04d}-agent" if name != cfg.agent.model else model_tag(name)
        by_bench: dict[str, Any] = {}
        headlines: dict[str, Any] = {}
        loaded = {b: _load(run_dir, cfg, b) for b in cfg.run.eval_benches}  # every suite's data before any model
        for bench_name, (bench, data, everything) in loaded.items():
            result = _evaluate(run_dir, cfg, epoch, bench_name, bench, data, everything, name, tag, out, ui)
            by_bench[bench_name] = {k: result["counts"][k] for k in ("samples", "correct")}
            headlines[bench_name] = result["headline"]["value"]
        out.counts.update({"samples": sum(b["samples"] for b in by_bench.values()), "by_bench": by_bench})
        out.metrics["evals"] = headlines
        if isinstance(headlines.get(HELDOUT), int | float):
            out.metrics["heldout_success"] = headlines[HELDOUT] / 100.0  # a fraction, as metrics.json's success_rate

    result = execute(run_dir, cfg, STAGE, epoch, lambda: plan(run_dir, cfg, epoch), body, force=force)
    from genenv_cli.machinery.pruning import prune

    prune(run_dir, cfg)  # the epoch's last stage: the epoch is done now, so the one before may be pruned
    return result


def _load(run_dir: RunDir, cfg: Config, bench_name: str) -> tuple[Any, Any, list[Any]]:
    """(the suite, its loaded data, every item): a suite whose data cannot be had says which settings go on without
    it."""
    from genenv_cli.stages.eval_samples import load_samples

    bench = stage_benchmark(bench_name, cfg.score.item_timeout_s)  # a plugin's under the guard
    try:
        data, everything = load_samples(run_dir, cfg, bench, bench_name, None, None, None, PROTOCOL, None)
    except InputError as exc:
        raise InputError(f"{exc} (eval-agent evaluates each of run.eval_benches every run.eval_every-th epoch: "
                         f"remove {bench_name} from run.eval_benches, or set run.eval_every = 0, to go on without "
                         f"it.)") from None
    return bench, data, everything


def _evaluate(run_dir: RunDir, cfg: Config, epoch: int, bench_name: str, bench: Any, data: Any, everything: list[Any],
              name: str, tag: str, out: Staging, ui: UI) -> dict[str, Any]:
    """One benchmark: its items picked, generated and scored as `genenv evaluate` does, written to the staging."""
    from genenv_cli.stages.eval_samples import generate, result_record, sample_rows

    samples = spread(everything, cfg.run.eval_limit)
    outputs, verdicts, notes, sampling, model_info = generate(bench, samples, cfg, name, tag, PROTOCOL, ui)
    limit = len(samples) if len(samples) < len(everything) else None
    result = result_record(bench, bench_name, samples, verdicts, notes, cfg, loaded=data, tag=tag, epoch=epoch,
                           protocol=PROTOCOL, split=None, model_info=model_info, sampling=sampling, limit=limit)
    samples_tmp = out.path(f"{bench_name}.samples")
    write_jsonl(samples_tmp, sample_rows(samples, outputs, verdicts, notes))
    samples_path = run_dir.epoch_eval_paths(epoch, bench_name)[1]
    result["samples"] = {"path": samples_path.name, "sha256": fingerprint(samples_tmp)["sha256"], "n": len(samples)}
    result["stage"] = STAGE
    result["of"] = len(everything)  # items in the whole set, of which `n` were evaluated
    write_new(out.path(bench_name), json_bytes(result))
    return result
