"""One module per stage, and `STAGES`: what the rest of the program knows about each of them, said once.

A stage module has `STAGE` (its name), `plan(run_dir, cfg, epoch, ...)` (what it reads and writes),
`run(run_dir, cfg, epoch, ...)` and `summary(counts, metrics)` (one line for people, from its manifest); no
stage imports another. Its `Stage` entry below adds what must
be known without importing it (the CLI's `--help` stays light): the command's help, status's column header
and count, and which of its manifest's numbers go into metrics.json. `EPOCH_STAGES` is the order an epoch
runs them in.

This package holds exactly the five epoch stages. `genenv evaluate` is no stage (it evaluates any checkpoint or
model, or predictions made elsewhere, on a benchmark, outside the epochs, under no lock and with no manifest: its
result file, which records the samples' sha256, is its own record), so it lives with the suites, in
`evals/run.py`.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from types import ModuleType


@dataclass(frozen=True)
class Stage:
    name: str      # the command, the manifest's name, the log's name
    module: str    # where plan(), run() and summary() live; imported only when the stage is used
    help: str      # the command's help
    short: str = ""  # status's column header (default: the name)
    count: str | None = None  # the manifest count status shows beside the state
    # metrics.json key -> ("counts" | "metrics", the key in this stage's manifest)
    metrics: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def column(self) -> str:
        return self.short or self.name

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


STAGES: dict[str, Stage] = {s.name: s for s in [
    Stage("generate-tasks", "genenv_cli.stages.generate_tasks",
          "The environment writes the epoch's tasks (epochs/N/tasks.jsonl).", short="generate", count="tasks",
          metrics={"tasks": ("counts", "tasks"), "env_tasks": ("counts", "env_tasks"),
                   "seed_tasks": ("counts", "seed_tasks"),
                   "valid_generation_rate": ("counts", "valid_generation_rate")}),
    Stage("rollout", "genenv_cli.stages.rollout",
          "The agent attempts every task K times (epochs/N/rollouts.parquet).", count="rollouts"),
    Stage("score", "genenv_cli.stages.score",
          "Grade the rollouts: scores, task stats, R_env, and the pools' partitions.", count="rollouts",
          metrics={"rollouts": ("counts", "rollouts"),
                   **{k: ("metrics", k) for k in (
                       "success_rate", "batch_p_mean", "band_share", "env_r_mean", "env_batches_kept", "env_batches",
                       "env_batch_band_share", "informative_share", "env_shape_mix", "shape_success",
                       "mean_prompt_tokens", "mean_completion_tokens", "env_groups",
                       "env_groups_informative_share", "env_reward_valid", "env_reward_invalid")}}),
    Stage("update-agent", "genenv_cli.stages.update_agent",
          "GRPO on the epoch's scored rollouts -> epochs/N/agent/ (runs under accelerate launch too).",
          short="upd-agent", count="samples_used",
          metrics={"agent_train_reward": ("metrics", "train_reward"), "agent_loss": ("metrics", "loss_mean"),
                   "agent_kl": ("metrics", "kl_mean"),
                   "agent_logp_mismatch": ("metrics", "mismatch_logp_abs_diff"),
                   "agent_sampler_kl": ("metrics", "mismatch_sampler_kl"),
                   "agent_is_truncated": ("metrics", "mismatch_truncated_share")}),
    Stage("update-env", "genenv_cli.stages.update_env",
          "The environment learns (reward-weighted regression, or GRPO: env_update.algo) on a KL leash -> "
          "epochs/N/env/.",
          short="upd-env", count="samples_used",
          metrics={"env_loss": ("metrics", "loss_mean"), "env_kl": ("metrics", "kl_final"),
                   "env_kl_stopped": ("metrics", "kl_stopped")}),
]}

# an epoch is every stage, in the order STAGES lists them (which is the order they run in)
EPOCH_STAGES = list(STAGES)


def stage_of(name: str) -> Stage:
    """The entry of a stage, also for a rollout shard's name (`rollout.shard-2-of-4`)."""
    return STAGES[name.split(".")[0]]


def stage_module(name: str) -> ModuleType:
    return stage_of(name).load()


def available(name: str) -> bool:
    return stage_of(name).available()
