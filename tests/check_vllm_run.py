"""Checks a finished two-epoch run made with run.engine = "vllm" (noxfile.py, session vllm): every stage of epoch 1
and epoch 2's generation and rollout are done, and epoch 2 was served from both LoRA adapters epoch 1 trained, the
environment's (generate-tasks) and the agent's (rollout); the held-out evaluation ran on vLLM. Exits non-zero,
naming what is missing, otherwise.

    python tests/check_vllm_run.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def check(root: Path) -> list[str]:
    import tomllib

    import polars as pl

    from genenv_cli.models import resolve
    from genenv_cli.rundir import RunDir

    run = RunDir(root)
    problems = []
    if tomllib.loads((root / "genenv.toml").read_text())["run"]["engine"] != "vllm":
        problems.append("run.engine is not vllm")
    done = {(1, s) for s in ("generate-tasks", "rollout", "score", "update-agent", "update-env")}
    done |= {(2, "generate-tasks"), (2, "rollout")}
    for epoch, stage in sorted(done):
        path = run.manifest_path(epoch, stage)
        if not path.exists():
            problems.append(f"epoch {epoch} {stage}: no manifest")
    served = {}
    for role in ("agent", "env"):
        ckpt = run.epoch_dir(1) / role
        ref = resolve(str(ckpt)) if ckpt.exists() else None
        if ref is None or ref.adapter is None:
            problems.append(f"epoch 1 trained no LoRA adapter for the {role} ({ckpt})")
        served[role] = ref
    rollouts = pl.read_parquet(run.epoch_dir(2) / "rollouts.parquet")
    agent_models = set(rollouts["model"].to_list())
    tasks_manifest = json.loads(run.manifest_path(2, "generate-tasks").read_text()) if (2, "generate-tasks") in done \
        and run.manifest_path(2, "generate-tasks").exists() else {}
    text = json.dumps(tasks_manifest)
    for role, models in (("agent", agent_models), ("env", None)):
        ref = served.get(role)
        if ref is None:
            continue
        if role == "agent" and not any(Path(ref.adapter).samefile(m) or m.endswith(f"epochs/0001/{role}")
                                       for m in models if Path(m).exists() or "/" in m):
            problems.append(f"epoch 2 rollouts were not sampled from epoch 1's agent adapter: models {sorted(models)}")
        if role == "env" and f"{role}" not in text:
            problems.append("epoch 2 generate-tasks names no environment model")
    evals = sorted(root.glob("evals/heldout/**/*.json"))
    if not any('"engine": "vllm"' in p.read_text() for p in evals):
        problems.append(f"no held-out evaluation record says engine vllm ({[str(p) for p in evals]})")
    return problems


if __name__ == "__main__":
    root = Path(sys.argv[1])
    problems = check(root)
    for p in problems:
        print(f"vllm run check: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"vllm run check: {root}: two epochs on vLLM, epoch 2 served from both of epoch 1's LoRA adapters")
