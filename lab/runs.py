"""Making and running the experiments' runs through the library: a run of an arm (`create_run`, as `genenv init`),
its epochs as `genenv run` runs them, and the held-out evaluation after each (read back with `RunDir.read_evals`)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import apply_overrides, config_from_dict
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.evalfiles import model_tag, result_paths
from lab.arms import arm_settings


def arm_config(domain: str, arm: list[str], seed: int, model: str, extra: list[str]) -> Any:
    """An arm's config, as `make_run` writes it."""
    return config_from_dict(apply_overrides({"run": {"domain": domain}}, arm_settings(arm, seed, model, extra)),
                            "experiment arm")


def make_run(root: Path, domain: str, arm: list[str], seed: int, model: str, extra: list[str]) -> RunDir:
    """The run of an arm at `root`, created as `genenv init` creates one unless it exists (runs resume)."""
    from genenv_cli.actions.create_run import create_run

    run = RunDir(root)
    if not run.config_path.exists():
        create_run(root, [domain], sets=arm_settings(arm, seed, model, extra))
    return run


def heldout_done(run: RunDir, epoch: int | None, limit: int | None = None) -> float | None:
    """The held-out success of an evaluation already made on the first `limit` exercises (None: all of them)."""
    for _, data in run.read_evals("heldout"):
        if data.get("epoch") == epoch and (epoch is not None or data.get("model_tag") == base_tag(run)) \
                and (data.get("config") or {}).get("limit") == limit:
            return data["headline"]["value"]
    return None


def base_tag(run: RunDir) -> str:
    """The file name's tag of the base agent's evaluation."""
    return model_tag(run.load_config().agent.model)


def heldout(run: RunDir, epoch: int | None, ui: UI, limit: int | None = None) -> float:
    """The held-out success (%) of the epoch's agent (None: the base model), evaluated unless already done."""
    from genenv_cli.actions.evaluate import evaluate

    done = heldout_done(run, epoch, limit)
    if done is not None:
        return done
    cfg = run.load_config()
    kw = {"epoch": epoch} if epoch else {"model": cfg.agent.model}
    return evaluate(run, cfg, "heldout", ui=ui, limit=limit, **kw)["headline"]["value"]


def share_base_eval(src: RunDir, dst: RunDir, limit: int | None = None) -> None:
    """The base model's held-out result is the same greedy evaluation in every run of a domain and model: made
    once and copied (result and samples) into the others."""
    if heldout_done(dst, None, limit) is not None:
        return
    name = base_tag(src) + (f".limit{limit}" if limit else "")  # evaluate's file name for a --limit subset
    result, samples = result_paths(src.evals_dir("heldout"), name)
    to_result, to_samples = result_paths(dst.evals_dir("heldout"), name)
    to_result.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(samples, to_samples)
    shutil.copyfile(result, to_result)  # the result last: it is what marks the evaluation done


def run_epochs(run: RunDir, epochs: int, ui: UI, timings_name: str,
               evaluate_after: bool = True, limit: int | None = None) -> Iterator[tuple[int, float | None, dict]]:
    """Epochs 1..`epochs` of the run (a finished one is skipped), each followed by its held-out evaluation when
    `evaluate_after`: yields (epoch, held-out success or None, {epoch: seconds}). The seconds an epoch took are kept
    in the run's folder under `timings_name`, so a resumed run still reports them."""
    from genenv_cli.actions.runner import run_epochs as run_stages

    timings_path = run.root / timings_name
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    cfg = run.load_config()
    for epoch in range(1, epochs + 1):
        t = time.time()
        results = run_stages(run, cfg, epoch, start=epoch, ui=ui)
        value = heldout(run, epoch, ui, limit) if evaluate_after else None
        if any(not r.skipped for r in results) or str(epoch) not in timings:
            timings[str(epoch)] = round(time.time() - t, 1)
            timings_path.write_text(json.dumps(timings))
        yield epoch, value, timings


def read_timings(run: RunDir, timings_name: str) -> dict[str, Any]:
    """The seconds of each epoch `run_epochs` kept ({} when none)."""
    path = run.root / timings_name
    return json.loads(path.read_text()) if path.exists() else {}
