"""evaluate: run an agent on a benchmark (or score predictions made elsewhere) with the benchmark's own metric.

    genenv evaluate --bench bfcl                       # the run's latest agent checkpoint
    genenv evaluate --bench bfcl --epoch 3             # epoch 3's agent
    genenv evaluate --bench bfcl --epoch 0             # the base agent model (agent.model)
    genenv evaluate --bench api-bank --model embedded  # any model: HF id, folder or `embedded`
    genenv evaluate --bench bamboogle --predictions preds.jsonl    # score outputs made elsewhere, no model
    genenv evaluate --bench bfcl --export inputs.jsonl              # write the inputs, generate anywhere
    genenv evaluate --list

**Predictions file**: JSONL, one `{"id": "<sample id>", "output": "<raw model text>"}` per line; ids are the
benchmark's documented sample ids (`--export` writes them). Samples without a prediction are scored as an
empty output and counted as `missing`. For ALFWorld's episodes, `output` is the episode's actions, one per
line (or a JSON list), replayed in the game.

**Export file**: JSONL, one `{"id", "category", "messages", "tools", "gold"}` per sample.

Writes `RUN/evals/<bench>/<tag>.json` (headline, the benchmark's summary overall and per category, the data
version and fingerprint, the model and sampling, counts) and `<tag>.samples.jsonl` beside it (id, category,
output, parsed form, verdict, reason, per-sample scores). `<tag>` is `epoch-0003-agent`, a model name, or
`pred-<file stem>`, plus `.paper` for the paper protocol, `.<split>` / `.limit<K>` when given and `.<label>` for
`--label NAME`. An earlier result of the same name made with other settings (sampling, seed, engine, dtype, or
other data) is not replaced without `--force`: the error names what differs (`--label` keeps both).

**Answer length**: `evaluate.max_new_tokens`, or when it is 0 (the default) what the benchmark needs
(`Benchmark.needed_tokens`): the run's `rollout.max_new_tokens` for heldout, 256 for bfcl and api-bank, 512 for
the others.

**Context**: a prompt that, with `evaluate.max_new_tokens`, would not fit the model's context is not sent; its
sample fails with `"end": "context_overflow"` and the numbers in its reason. Interactive episodes are checked
before every step and played together, one generate call per turn (machinery/episodes.py).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.suites import stage_benchmark
from genenv_cli.core.errors import ConfigError, InputError, elide
from genenv_cli.core.jsonio import json_lines
from genenv_cli.core.safefiles import refuse_links_below, remove_entry
from genenv_cli.core.ui import UI
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, Verdict
from genenv_cli.rundir import (
    EVALS,
    RunDir,
    clean_stale_tmp,
    commit,
    fingerprint,
    leftover_finals,
    recover_commit,
    replace_into_place,
    tmp_name,
)
from genenv_cli.rundir.checkpoint_records import checkpoint_usable
from genenv_cli.rundir.datafiles import write_jsonl
from genenv_cli.rundir.evalfiles import model_tag, result_paths, result_suffix
from genenv_cli.rundir.stage_state import require_done
from genenv_cli.stages.eval_samples import (
    answer_length,
    generate,
    load_samples,
    result_record,
    sample_rows,
    score_safely,
)

STAGE = "evaluate"


def read_predictions(path: Path) -> dict[str, str]:
    if not path.exists():
        raise InputError(f"{path}: predictions file not found.")
    if not path.is_file():
        raise InputError(f"{path} is a folder; --predictions takes a JSONL file of "
                         f'{{"id": <sample id>, "output": "<raw model text>"}} lines.')
    preds: dict[str, str] = {}
    for where, rec in json_lines(path, '{"id": <sample id>, "output": "<raw model text>"} per line'):
        if not isinstance(rec, dict) or not isinstance(rec.get("output"), str) or "id" not in rec:
            raise InputError(f"{where}: expected {{\"id\": <sample id>, \"output\": <string>}}.")
        sid = str(rec["id"])
        if sid in preds:
            raise InputError(f"{where}: id {sid!r} appears twice.")
        preds[sid] = rec["output"]
    return preds


def evaluate(run: RunDir | None, cfg: Config, bench_name: str, *, epoch: int | None = None, model: str | None = None,
             data: Path | None = None, predictions: Path | None = None, export: Path | None = None,
             limit: int | None = None, split: str | None = None, version: str | None = None,
             protocol: str = "official", out_dir: Path | None = None, ui: UI | None = None, force: bool = False,
             label: str | None = None) -> dict[str, Any]:
    """`genenv evaluate`: export the samples, score predictions made elsewhere, or generate with a model and score;
    then commit the result and its samples (`write_result`)."""
    ui = ui or UI(quiet=True)
    _check_options(run, cfg, protocol, label, export, epoch, model, predictions)
    bench: Benchmark = stage_benchmark(bench_name, cfg.score.item_timeout_s)  # a plugin's under the guard
    if run is not None and out_dir is None and export is None:
        folder, moved = run.output_dir(EVALS, bench_name)
        if moved:  # read-only storage: the results go to the user cache
            out_dir = folder
            ui.warn(f"{run.root} is read-only; the results go to {out_dir / bench_name} instead")
    loaded, samples = load_samples(run, cfg, bench, bench_name, data, split, version, protocol, limit)
    if export is not None:
        n = export_samples(samples, export)
        ui.info(f"wrote {n} {bench_name} samples to {export}")
        return {"exported": n, "path": str(export), "bench": bench_name}

    suffix = result_suffix(protocol, split, version, limit, label)
    # without a run, the results go to ./evals/<bench>, as if the current directory were one
    base = out_dir / bench_name if out_dir else (run or RunDir(Path())).evals_dir(bench_name)
    planned = {"data_fingerprint": loaded.fingerprint}
    if predictions is not None:
        outputs, verdicts, missing = score_predictions(bench, bench_name, samples, predictions, protocol, limit, cfg,
                                                       ui)
        tag, model_info, ep = f"pred-{model_tag(predictions.stem)}", {"predictions": str(predictions)}, None
        # after scoring, which is cheap: damaged data is reported as such first
        refuse_other_settings(result_paths(base, tag + suffix)[0], planned, force, ui)
        notes, sampling = [None] * len(samples), None
    else:
        planned |= {"temperature": cfg.evaluate.temperature, "max_new_tokens": answer_length(bench, cfg),
                    "seed": cfg.run.seed, "engine": cfg.run.engine, "dtype": cfg.run.dtype}
        name, tag, ep = _pick_model(run, cfg, epoch, model, ui)
        refuse_other_settings(result_paths(base, tag + suffix)[0], planned, force, ui)  # before any model is loaded
        outputs, verdicts, notes, sampling, model_info = generate(bench, samples, cfg, name, tag, protocol, ui)
        missing = 0
    result = result_record(bench, bench_name, samples, verdicts, notes, cfg, loaded=loaded, tag=tag, epoch=ep,
                           protocol=protocol, split=split, model_info=model_info, sampling=sampling, limit=limit,
                           label=label, missing=missing)
    if run is not None and out_dir is None:
        refuse_links_below(run.root, base, "the evaluation results")
    write_result(base, tag + suffix, result, sample_rows(samples, outputs, verdicts, notes))
    if run is not None and out_dir is None:
        from genenv_cli.trackers.sync import publish

        publish(run, cfg, ui)
    return result


def _check_options(run: RunDir | None, cfg: Config, protocol: str, label: str | None, export: Path | None,
                   *chosen: Any) -> None:
    """The options' own checks, before anything is loaded; `chosen` is --epoch, --model and --predictions."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"--protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}.")
    if label is not None and not LABEL.fullmatch(label):
        raise ConfigError(f"--label {label[:60]!r}: use 1 to 40 letters, digits, '.', '_' or '-' (it becomes part of "
                          f"the result's file name).")
    if run is not None and export is None:
        from genenv_cli.catalogue import trackers

        trackers.check_installed(cfg, "`evaluate`")
    if sum(x is not None for x in chosen) > 1:
        raise ConfigError("give at most one of --epoch, --model and --predictions.")


def score_predictions(bench: Benchmark, bench_name: str, samples: list[EvalSample], predictions: Path, protocol: str,
                      limit: int | None, cfg: Config, ui: UI) -> tuple[list[str], list[Verdict], int]:
    """(outputs, verdicts, samples without a prediction) of a predictions file, scored with the suite's metric."""
    preds = read_predictions(predictions)
    known = {s.id for s in samples}
    unknown = [k for k in preds if k not in known]
    if unknown and not limit:
        raise InputError(f"{predictions}: {len(unknown)} ids are not {bench_name} sample ids (first: {unknown[0]!r}); "
                         f"`genenv evaluate --bench {bench_name} --export FILE` lists them.")
    outputs = [preds.get(s.id, "") for s in samples]
    absent = [s.id for s in samples if s.id not in preds]
    if absent:
        ui.warn(f"{predictions}: {len(absent)} of {len(samples)} {bench_name} samples have no prediction (first: "
                f"{absent[0]!r}); they are scored as wrong (empty output).")
    timeout = cfg.score.item_timeout_s
    verdicts = [score_safely(bench, s, o, protocol, timeout) for s, o in zip(samples, outputs, strict=True)]
    return outputs, verdicts, len(absent)


def write_result(folder: Path, name: str, result: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Commit an evaluation: its samples (`rows`) as `<name>.samples.jsonl` and `result` as `<name>.json` in
    `folder`, by the stages' own commit (`rundir.commit`): the result is the samples' manifest, renamed in last.
    A kill leaves the previous result and samples, or the new ones, once the next evaluation in the folder has
    run its recovery first (`recover_results`). `result` gains `samples`, what the commit records, and `path`."""
    result_path, samples_path = result_paths(folder, name)
    folder.mkdir(parents=True, exist_ok=True)
    recover_results(folder)
    tmp = tmp_name(samples_path)
    try:
        write_jsonl(tmp, rows)
        fp = fingerprint(tmp)  # hashes the samples once, for the readers' sha256 and for recovery
        result["samples"] = {"path": samples_path.name, "sha256": fp["sha256"], "n": len(rows)}
        result["outputs"] = {"samples": {"path": samples_path.name, "fingerprint": fp}}
        commit([(tmp, samples_path)], result_path, result)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_entry(tmp)
        raise
    result["path"] = str(result_path)


def recover_results(folder: Path) -> list[str]:
    """What an evaluation does first in a benchmark's result folder: finish or undo every killed evaluation's
    half-done commit there (`rundir.recover_commit`, as a stage does before it runs), then remove what dead
    writers left. Returns what it did, one line each."""
    done: list[str] = []
    names = {n.removesuffix(".samples.jsonl") if n.endswith(".samples.jsonl") else n.removesuffix(".json")
             for n in leftover_finals(folder) if n.endswith(".json") or n.endswith(".samples.jsonl")}
    for name in sorted(names):
        result_path, samples_path = result_paths(folder, name)
        done += recover_commit({samples_path.name: samples_path}, result_path, folder)
    clean_stale_tmp(folder)
    return done


LABEL = re.compile(r"[A-Za-z0-9._-]{1,40}")


def recorded_settings(result: dict[str, Any]) -> dict[str, Any]:
    """What an earlier result says it was made with, in `planned`'s keys (a key it does not record is left out)."""
    sampling = result.get("sampling") if isinstance(result.get("sampling"), dict) else {}
    config = result.get("config") if isinstance(result.get("config"), dict) else {}
    out = {k: sampling[k] for k in ("temperature", "max_new_tokens") if k in sampling}
    if "seed" in config or "seed" in sampling:
        out["seed"] = config.get("seed", sampling.get("seed"))
    out |= {k: config[k] for k in ("engine", "dtype") if k in config}
    if "data_fingerprint" in result:
        out["data_fingerprint"] = result["data_fingerprint"]
    return out


def refuse_other_settings(path: Path, planned: dict[str, Any], force: bool, ui: UI) -> None:
    """An earlier result at `path` made with other settings is not replaced without --force: the error names the
    settings that differ, and how to keep both (--label). The same settings again replace it, saying so."""
    if not path.exists():
        return
    from genenv_cli.rundir import read_json

    try:
        old, damaged = recorded_settings(read_json(path, "evaluation result")), False
    except InputError:
        old, damaged = {}, True  # nothing can be compared; --force is asked for all the same
    differ = {k: (old.get(k), v) for k, v in planned.items() if k in old and old[k] != v}
    if not differ and not damaged:
        ui.info(f"replacing {path} (made with the same settings)")
        return
    if force:
        ui.warn(f"--force: replacing {path}" + (f" (made with {_settings_text(differ)})" if differ else ""))
        return
    what = f"made with other settings ({_settings_text(differ)})" if differ else "that cannot be read"
    raise ConfigError(f"{path} holds an evaluation {what}. Pass --force to replace it, or --label NAME to write "
                      f"this one beside it ({path.stem}.NAME.json).")


def _settings_text(differ: dict[str, tuple[Any, Any]]) -> str:
    names = {"temperature": "evaluate.temperature", "max_new_tokens": "evaluate.max_new_tokens", "seed": "run.seed",
             "engine": "run.engine", "dtype": "run.dtype", "data_fingerprint": "the data"}
    return ", ".join(f"{names.get(k, k)} {was} → {now}" if k != "data_fingerprint" else "the data changed"
                     for k, (was, now) in differ.items())


def export_samples(samples: list[EvalSample], path: Path) -> int:
    """`--export`: the samples as JSON lines a model elsewhere can answer (the inputs, without the scoring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    n = write_jsonl(tmp, ({"id": s.id, "category": s.category, "messages": s.messages, "tools": s.tools,
                           "gold": s.gold} for s in samples))
    replace_into_place(tmp, path)
    return n


def _pick_model(run: RunDir | None, cfg: Config, epoch: int | None, model: str | None,
                ui: UI | None = None) -> tuple[str, str, int | None]:
    from genenv_cli.machinery.checkpoints import AGENT_STAGE, latest_agent, missing_checkpoint

    if model is not None:
        return model, model_tag(model), None
    if run is None:
        raise ConfigError("no run directory: pass --model, --predictions or --run.")
    if epoch == 0:  # asked for explicitly: the run's base agent model
        return cfg.agent.model, model_tag(cfg.agent.model), None
    if epoch is not None:
        require_done(run, epoch, AGENT_STAGE, "evaluate")
        if not checkpoint_usable(run, run.checkpoint_dir(epoch, "agent")):
            raise missing_checkpoint(run, cfg, epoch, f"evaluate --epoch {epoch}")
        return str(run.checkpoint_dir(epoch, "agent")), f"epoch-{epoch:04d}-agent", epoch
    name, tag = latest_agent(run, cfg)
    if tag == cfg.agent.model and run.epochs() and ui is not None:
        ui.warn(f"no update-agent of {run.root} has completed yet; evaluating the base agent model "
                f"{elide(cfg.agent.model, 200)} (`--epoch 0` asks for it explicitly)")
    m = re.match(r"epochs/(\d+)/agent", tag)
    if m:
        return name, f"epoch-{int(m.group(1)):04d}-agent", int(m.group(1))
    return name, model_tag(name), None


