"""One module per stage, and `STAGES`: what the rest of the program knows about each of them, said once.

A stage module has `STAGE` (its name), `plan(run_dir, cfg, epoch, ...)` (what it reads and writes),
`run(run_dir, cfg, epoch, ...)` and `summary(counts, metrics)` (one line for people, from its manifest); no
stage imports another. Its `Stage` row below adds what must
be known without importing it (the CLI's `--help` stays light): the command's help, status's column header
and count, which of its manifest's numbers go into metrics.json, whether it trains (pipelines launch it under
`TRAIN`), and the pip extras it needs. `STAGES` lists them in the order an epoch runs them (`epoch_stages()`):
the built-in rows, then a plugin's rows (the entry-point group `genenv.stages`: each entry point names a `Stage`
row, under the stage's name), then rows `STAGES.register` adds in this process (a test's throwaway stage, a
script's own), each placed after the stage its row names. `status`, `run`, the CLI (a command for every row, so
`genenv run`'s processes run a plugin's stage) and the pipelines read the order from here (pipelines/epoch.sh is
checked against it by a test).

The built-in rows are the six epoch stages: the five of the method, then `eval-agent` (the epoch's agent on the
held-out set and named benchmarks, every run.eval_every-th epoch). `genenv evaluate` is no stage (it evaluates any
checkpoint or model, or predictions made elsewhere, on a benchmark, outside the epochs, under no lock and with no
manifest: its result file, which records the samples' sha256, is its own record), so it has no row here
(`actions/evaluate.py`; eval-agent shares its generation and scoring, `stages/eval_samples.py`).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from types import ModuleType

from genenv_cli.core.errors import RegistryError
from genenv_cli.core.registry import check_name

GROUP = "genenv.stages"  # the entry-point group of plugins' stages: NAME = "module:ROW", ROW a `Stage`


@dataclass(frozen=True)
class Stage:
    name: str      # the command, the manifest's name, the log's name
    module: str    # where plan(), run() and summary() live; imported only when the stage is used
    help: str      # the command's help
    short: str = ""  # status's column header (default: the name)
    count: str | None = None  # the manifest count status shows beside the state
    # metrics.json key -> ("counts" | "metrics", the key in this stage's manifest)
    metrics: dict[str, tuple[str, str]] = field(default_factory=dict)
    training: bool = False  # a model update: pipelines launch it under TRAIN, `run` shows it one GPU
    extras: tuple[str, ...] = ()  # the pip extras (pyproject's optional-dependencies) it needs beyond the core
    after: str | None = None  # an added row: the stage it runs after (None: last)

    @property
    def column(self) -> str:
        return self.short or self.name

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


class StageTable:
    """The stages in epoch order: `builtins` (the project's), then the plugins' (the entry-point group `GROUP`, read
    on first use), then `added` (registered in this process), each plugin's or added row right after the stage its
    `after` names. Reads like a dict of name -> Stage."""

    def __init__(self, rows: list[Stage], group: str = GROUP):
        self.builtins: dict[str, Stage] = {s.name: s for s in rows}
        self.added: dict[str, Stage] = {}
        self.group = group
        self._plugins: dict[str, Stage] | None = None

    @property
    def plugins(self) -> dict[str, Stage]:
        """The rows the entry-point group names, read once per process (`forget_plugins` reads them again). An entry
        point that does not load, or loads no `Stage` of its own name, is refused naming the plugin."""
        if self._plugins is None:
            from importlib.metadata import entry_points  # slow to import: only when the stages are listed

            found: dict[str, Stage] = {}
            for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
                where = f"stage plugin `{ep.name}` (entry point {ep.value} in {self.group})"
                check_name(where, ep.name)
                try:
                    row = ep.load()
                except Exception as exc:  # noqa: BLE001 - a plugin's import error, named as the plugin's
                    raise RegistryError(f"{where} could not be loaded: {type(exc).__name__}: {exc}") from exc
                if not isinstance(row, Stage) or row.name != ep.name:
                    raise RegistryError(f"{where}: expected a genenv_cli.catalogue.stages.Stage named `{ep.name}`, "
                                        f"got {row!r:.200}.")
                if ep.name in self.builtins:
                    raise RegistryError(f"{where}: `{ep.name}` is a built-in stage; a plugin's stage needs a name "
                                        f"of its own.")
                found[ep.name] = row
            self._plugins = found
        return self._plugins

    def forget_plugins(self) -> None:
        """Read the entry-point group again on next use (after installing a plugin in this process)."""
        self._plugins = None

    def register(self, stage: Stage) -> None:
        """Add (or replace) a stage for this process; its `after` must name a stage already known."""
        if stage.after is not None and stage.after not in self:
            raise KeyError(f"stage {stage.name!r} runs after {stage.after!r}, which is no stage")
        self.added[stage.name] = stage

    def unregister(self, name: str) -> None:
        """Remove a stage `register` added (a built-in stays)."""
        self.added.pop(name, None)

    def _ordered(self) -> list[Stage]:
        order = list(self.builtins.values())
        for stage in [*self.plugins.values(), *self.added.values()]:
            order = [s for s in order if s.name != stage.name]
            at = next((i + 1 for i, s in enumerate(order) if s.name == stage.after), len(order))
            order.insert(at, stage)
        return order

    def __iter__(self):
        return iter([s.name for s in self._ordered()])

    def __len__(self) -> int:
        return len(self._ordered())

    def __contains__(self, name: object) -> bool:
        return name in self.added or name in self.builtins or name in self.plugins

    def __getitem__(self, name: str) -> Stage:
        for rows in (self.added, self.builtins):
            if name in rows:
                return rows[name]
        return self.plugins[name]

    def keys(self) -> list[str]:
        return list(self)

    def values(self) -> list[Stage]:
        return self._ordered()

    def items(self) -> list[tuple[str, Stage]]:
        return [(s.name, s) for s in self._ordered()]


STAGES = StageTable([
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
                       "shape_success_by_source", "mean_prompt_tokens", "mean_completion_tokens", "env_groups",
                       "env_groups_informative_share", "env_reward_valid", "env_reward_invalid")}}),
    Stage("update-agent", "genenv_cli.stages.update_agent",
          "GRPO on the epoch's scored rollouts -> epochs/N/agent/ (runs under accelerate launch too).",
          short="upd-agent", count="samples_used", training=True,
          metrics={"agent_train_reward": ("metrics", "train_reward"), "agent_loss": ("metrics", "loss_mean"),
                   "agent_kl": ("metrics", "kl_mean"),
                   "agent_logp_mismatch": ("metrics", "mismatch_logp_abs_diff"),
                   "agent_sampler_kl": ("metrics", "mismatch_sampler_kl"),
                   "agent_is_truncated": ("metrics", "mismatch_truncated_share")}),
    Stage("update-env", "genenv_cli.stages.update_env",
          "The environment learns (reward-weighted regression, or GRPO: env_update.algo) on a KL leash -> "
          "epochs/N/env/.",
          short="upd-env", count="samples_used", training=True,
          metrics={"env_loss": ("metrics", "loss_mean"), "env_kl": ("metrics", "kl_final"),
                   "env_kl_stopped": ("metrics", "kl_stopped")}),
    Stage("eval-agent", "genenv_cli.stages.eval_agent",
          "The epoch's agent on run.eval_benches (default: the held-out seeds), every run.eval_every-th epoch "
          "(epochs/N/evals/).", short="eval", count="samples",
          metrics={"heldout_success": ("metrics", "heldout_success"), "evals": ("metrics", "evals")}),
])

# the project's own epoch: its built-in stages in the order they run
EPOCH_STAGES = list(STAGES.builtins)


def epoch_stages() -> list[str]:
    """The stages an epoch runs now, in order: the built-ins and those registered in this process."""
    return list(STAGES)


def stage_of(name: str) -> Stage:
    """The entry of a stage, also for a rollout shard's name (`rollout.shard-2-of-4`)."""
    return STAGES[name.split(".")[0]]


def stage_module(name: str) -> ModuleType:
    return stage_of(name).load()


def available(name: str) -> bool:
    return stage_of(name).available()
