"""Checks a run made by `nox -s vllm` (noxfile.py): run.engine = "vllm"; every stage of epoch 1 done, the two
updates each with at least one optimizer step into a LoRA adapter; epoch 2's generate-tasks and rollout done and
served from those adapters (the environment's writes epoch 2's tasks, the agent's samples its rollouts); the
held-out evaluation run on vLLM. Prints what it found; exits 1 naming what is missing.

    python tests/check_vllm_run.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

EPOCH1 = ("generate-tasks", "rollout", "score", "update-agent", "update-env")
EPOCH2 = ("generate-tasks", "rollout")


def check(root: Path) -> tuple[list[str], list[str]]:
    """(problems, findings)."""
    import polars as pl

    problems, found = [], []
    engine = tomllib.loads((root / "genenv.toml").read_text()).get("run", {}).get("engine")
    (found if engine == "vllm" else problems).append(f"run.engine = {engine!r}")
    manifests = {}
    for epoch, stages in ((1, EPOCH1), (2, EPOCH2)):
        for stage in stages:
            path = root / "epochs" / f"{epoch:04d}" / "manifests" / f"{stage}.json"
            if path.exists():
                manifests[epoch, stage] = json.loads(path.read_text())
            else:
                problems.append(f"epoch {epoch} {stage}: not done (no {path.relative_to(root)})")
    e1 = root / "epochs" / "0001"
    for role, update in (("agent", "agent_update"), ("env", "env_update")):
        meta_path = e1 / role / "genenv_checkpoint.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if meta.get("kind") != "lora":
            problems.append(f"epoch 1 wrote no LoRA adapter for the {role} ({meta_path.relative_to(root)}: {meta})")
        steps_path = e1 / f"{update}_steps.parquet"
        steps = pl.read_parquet(steps_path).height if steps_path.exists() else 0
        if steps == 0:
            problems.append(f"epoch 1's {update} made no optimizer step: its adapter is the base model")
        else:
            found.append(f"epoch 1 trained the {role}'s LoRA adapter ({steps} steps)")
    env_model = manifests.get((2, "generate-tasks"), {}).get("values", {}).get("env_model")
    if env_model != "epochs/0001/env":
        problems.append(f"epoch 2's tasks were not written by epoch 1's environment adapter (env_model {env_model!r})")
    else:
        written = [t for t in map(json.loads, (root / "epochs/0002/tasks.jsonl").read_text().splitlines())
                   if t["source"] == "env"]
        found.append(f"epoch 2 generate-tasks served epochs/0001/env ({len(written)} tasks written by it)")
    rollouts = root / "epochs/0002/rollouts.parquet"
    models = set(pl.read_parquet(rollouts, columns=["model"])["model"].to_list()) if rollouts.exists() else set()
    if models != {"epochs/0001/agent"}:
        problems.append(f"epoch 2's rollouts were not sampled from epoch 1's agent adapter (models {sorted(models)})")
    else:
        found.append(f"epoch 2 rollout served epochs/0001/agent ({pl.read_parquet(rollouts).height} rollouts)")
    records = [json.loads(p.read_text()) for p in sorted((root / "evals").rglob("*.json"))] if (root / "evals").exists() \
        else []
    engines = {r.get("engine") for r in records if isinstance(r, dict)} | {
        r.get("config", {}).get("engine") for r in records if isinstance(r, dict) and isinstance(r.get("config"), dict)}
    if "vllm" not in engines:
        problems.append(f"no held-out evaluation record names engine vllm (found {sorted(map(str, engines))})")
    else:
        found.append("evaluate --bench heldout ran on vllm")
    return problems, found


if __name__ == "__main__":
    run = Path(sys.argv[1])
    problems, found = check(run)
    for line in found:
        print(f"vllm run check: {line}")
    for line in problems:
        print(f"vllm run check: FAILED: {line}", file=sys.stderr)
    sys.exit(1 if problems else 0)
