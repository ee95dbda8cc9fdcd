"""Where an environment-only epoch's time goes, stage by stage and epoch by epoch, for any checkout of genenv.

    python -m benchmarks.speed.env_only_profile --label after                          # this checkout
    python -m benchmarks.speed.env_only_profile --label before --code ../old/src      # another checkout's src/
    python -m benchmarks.speed.env_only_profile --arm env-only-grpo --label grpo
    python -m benchmarks.speed.env_only_profile --label replay --replay RUN --epoch 5 --codes before=../old/src after=src

The run is the environment-only experiment's (experiments/env_only.py, its arms in lab/arms.py: the curriculum
experiment's settings, the agent never trained), seed 1, on the embedded model, for --epochs epochs. Every stage
runs as its own process, as `genenv run` runs it, through the CLI of the code under test (`--code`: a `src/` folder put first on PYTHONPATH), with one
torch thread, as the experiment's runs do. Recorded per epoch and stage: the wall seconds, the CPU seconds the stage's
process used (user + system: with one thread, what the stage computed, which a busy machine inflates far less than
the wall time) and the seconds its manifest records; the load average before each epoch. An epoch's later stages
grow with it where an update reads every earlier epoch (`env_update.window = 0` under rwr), so the profile covers
several. Writes results/epoch_profile/env_only-<label>.json.

Two checkouts sample different tasks once their sampling differs, so their updates train on different data; `--replay
RUN --epoch E` compares the updates on the same data: a copy of a finished run's folder per checkout (`--codes
NAME=SRC ...`), `update-env --epoch E --force` in each, its CPU and wall seconds and what it trained on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STAGES = ["generate-tasks", "rollout", "score", "update-agent", "update-env"]


def settings(arm: str, seed: int) -> list[str]:
    from lab.arms import ENV_ONLY, arm_settings

    return arm_settings(ENV_ONLY[arm], seed, "embedded", [])


def stage_process(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one stage's process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def drop_unknown_keys(run: Path, env: dict[str, str]) -> list[str]:
    """Settings of the run's genenv.toml that an older checkout does not know, taken out of the copy (their values
    must be what that checkout did without them: the caller lists them in the result). Asks the checkout itself:
    `genenv status` names the first unknown key of its config check, one at a time."""
    import re

    dropped: list[str] = []
    toml = run / "genenv.toml"
    for _ in range(20):
        done = subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--run", str(run)], env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        found = re.search(r"unknown key `(\w+)\.(\w+)`", done.stdout + done.stderr)
        if not found:
            return dropped
        section, key = found.groups()
        lines, inside = toml.read_text().splitlines(keepends=True), False
        for i, line in enumerate(lines):
            if line.startswith("["):
                inside = line.strip() == f"[{section}]"
            elif inside and re.match(rf"{key}\s*=", line):
                del lines[i]
                break
        else:
            raise SystemExit(f"{toml}: cannot find {section}.{key}")
        toml.write_text("".join(lines))
        dropped.append(f"{section}.{key}")
    raise SystemExit(f"{toml}: more than 20 unknown keys")


def replay(run: Path, epoch: int, codes: dict[str, Path], label: str) -> None:
    """update-env of `epoch` redone by each checkout on its own copy of `run`: the same data for every one."""
    import shutil

    from lab.record import git_commit

    from benchmarks.speed.common import write_result

    figures: dict[str, Any] = {}
    for name, code in codes.items():
        with tempfile.TemporaryDirectory(prefix="env-only-replay-") as tmp:
            copy = Path(tmp) / "run"
            shutil.copytree(run, copy, symlinks=True)
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(code.resolve())}
            load = round(os.getloadavg()[0], 2)
            dropped = drop_unknown_keys(copy, env)
            wall, cpu = stage_process([sys.executable, "-m", "genenv_cli", "update-env", "--run", str(copy), "--epoch",
                                       str(epoch), "--force", "--quiet"], env)
            manifest = json.loads((copy / "epochs" / f"{epoch:04d}" / "manifests" / "update-env.json").read_text())
        figures[name] = {"code_commit": git_commit(code.resolve().parent), "wall_s": round(wall, 1),
                         "cpu_s": round(cpu, 1), "manifest_s": round(manifest["seconds"], 1), "load_average": load,
                         "dropped_keys": dropped,
                         "counts": {k: v for k, v in manifest.get("counts", {}).items() if isinstance(v, int | str)}}
        print(name, json.dumps(figures[name]), flush=True)
    write_result("epoch_profile", f"env_only-{label}", figures, settings={"run": run.name, "epoch": epoch,
                                                                          "threads": 1})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--code", type=Path, default=None, help="the src/ folder of the genenv to profile (default: this)")
    ap.add_argument("--arm", default="env-only")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", type=Path, default=None, help="where the run goes (default: a temporary folder)")
    ap.add_argument("--replay", type=Path, default=None, help="a finished run: redo one epoch's update-env instead")
    ap.add_argument("--epoch", type=int, default=None, help="with --replay: the epoch")
    ap.add_argument("--codes", nargs="+", default=[], help="with --replay: NAME=SRC of each checkout")
    args = ap.parse_args()
    if args.replay is not None:
        replay(args.replay, args.epoch, {k: Path(v) for k, v in (c.split("=", 1) for c in args.codes)}, args.label)
        return

    from lab.record import git_commit

    from benchmarks.speed.common import write_result

    code = (args.code or Path(__file__).resolve().parents[2] / "src").resolve()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cli = [sys.executable, "-m", "genenv_cli"]
    commit = git_commit(code.parent)
    with tempfile.TemporaryDirectory(prefix="env-only-profile-") as tmp:
        run = (args.work or Path(tmp)) / f"{args.arm}-s{args.seed}"
        subprocess.run([*cli, "init", str(run), "--force", "--domain", "arith",
                        *[x for s in settings(args.arm, args.seed) for x in ("--set", s)]],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        epochs: list[dict[str, Any]] = []
        for epoch in range(1, args.epochs + 1):
            row: dict[str, Any] = {"epoch": epoch, "load_average": round(os.getloadavg()[0], 2), "stages": {}}
            for stage in STAGES:
                wall, cpu = stage_process([*cli, stage, "--run", str(run), "--epoch", str(epoch), "--quiet"], env)
                manifest = json.loads((run / "epochs" / f"{epoch:04d}" / "manifests" / f"{stage}.json").read_text())
                row["stages"][stage] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                                        "manifest_s": round(manifest["seconds"], 1),
                                        "counts": {k: v for k, v in manifest.get("counts", {}).items()
                                                   if isinstance(v, int | float | str)}}
            row["wall_s"] = round(sum(s["wall_s"] for s in row["stages"].values()), 1)
            row["cpu_s"] = round(sum(s["cpu_s"] for s in row["stages"].values()), 1)
            epochs.append(row)
            print(json.dumps({"epoch": epoch, "wall_s": row["wall_s"], "cpu_s": row["cpu_s"],
                              **{k: v["cpu_s"] for k, v in row["stages"].items()}}), flush=True)
            write_result("epoch_profile", f"env_only-{args.label}", {"epochs": epochs, "complete": False},
                         settings={"arm": args.arm, "seed": args.seed, "config": settings(args.arm, args.seed),
                                   "threads": 1, "code_commit": commit})
    write_result("epoch_profile", f"env_only-{args.label}", {"epochs": epochs, "complete": True},
                 settings={"arm": args.arm, "seed": args.seed, "config": settings(args.arm, args.seed), "threads": 1,
                           "code_commit": commit})


if __name__ == "__main__":
    main()
