"""The schema of every file in a run directory, and the keys of metrics.json.

`SCHEMAS` is the single source of truth: docs/pools.md is generated from it (`python -m genenv_cli.rundir`
prints the tables; a test keeps the document in step), and every read validates against it (`rundir.datafiles`), so a
malformed line or a wrong column fails with the file, the line and what was expected, before anything
is written.

Types: `str`, `int`, `float`, `bool`, `list[int]`, `list[float]`, `json` (any JSON value; in Parquet a
JSON-encoded string). A trailing `?` means the value may be null.
"""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str
    late: bool = False  # added after files without it were written: such a file reads as if it held nulls
    # an episode's column: written only where some row has a value (a run of single-turn domains writes the files it
    # always wrote), and a file without it reads as if it held nulls
    episodic: bool = False

    @property
    def nullable(self) -> bool:
        return self.type.endswith("?")

    @property
    def base(self) -> str:
        return self.type.rstrip("?")


@dataclass(frozen=True)
class FileSchema:
    key: str
    path: str          # where it lives in the run directory
    format: str        # jsonl | parquet
    writer: str        # the stage that writes it
    doc: str
    columns: tuple[Column, ...]

    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def _s(key: str, path: str, fmt: str, writer: str, doc: str, *cols: tuple[Any, ...]) -> FileSchema:
    return FileSchema(key, path, fmt, writer, doc, tuple(Column(*c) for c in cols))


# every row of a run's files below tasks.jsonl carries its task's domain (a mixed run has several); files written
# before the column existed lack it, and read as if it were null: the run's domain (run.domain)
_DOMAIN = ("domain", "str?", "The task's domain, e.g. `tool_call`; null (or absent) in files written before the "
           "column existed, meaning the run's domain.", True)

# the columns of a multi-turn episode (`Environment` in domains/base.py), absent from the files of single-turn domains
_MASK_DOC = ("Per token of `completion_token_ids`: 1 where the agent sampled it, 0 for the environment's tokens (its "
             "observations and the chat template's turn markers between the agent's turns), which get no gradient, no "
             "KL and no importance weight. Null (or absent) for a single-turn rollout: every token is the agent's.")
_TURNS = ("turns", "int?", "Agent turns the episode took; null (or absent) for a single-turn rollout.", True, True)
_END = ("end", "str?", "Why the episode ended: `done` (the environment ended it), `turn_cap` (the domain's "
        "`max_turns` reached), `context_overflow` (the next prompt would not fit the model's context); null for a "
        "single-turn rollout.", True, True)

SCHEMAS: dict[str, FileSchema] = {s.key: s for s in [
    _s("tasks", "epochs/NNNN/tasks.jsonl", "jsonl", "generate-tasks",
       "One task per line: seed tasks and valid environment generations.",
       ("task_id", "str", "Unique id: `e0003-b0012-v2` (environment) or `e0003-seed-tc-0042` (seed)."),
       ("epoch", "int", "Epoch that wrote it."),
       ("batch_id", "str", "Task batch: the n variations written from one conditioning context (a seed task is a batch of its own)."),
       ("source", "str", "`seed` (base data) or `env` (written by the environment model)."),
       ("domain", "str", "Domain name, e.g. `tool_call`."),
       ("shape", "str", "Difficulty shape tag of the domain, e.g. `single`, `parallel`, `no_tool`."),
       ("payload", "json", "The task itself, in the domain's format (docs of the domain)."),
       ("parent_id", "str?", "The seed or earlier task this one varies (null for seeds)."),
       ("context", "json?", "Conditioning context: parent task, agent statistics of the previous epoch, frontier examples."),
       ("env_prompt", "json?", "Chat messages given to the environment model (its training input)."),
       ("env_output", "str?", "The environment model's raw output for this task (its training target)."),
       ("env_model", "str?", "The environment checkpoint that wrote it.")),
    _s("rejects", "epochs/NNNN/tasks.rejects.jsonl", "jsonl", "generate-tasks",
       "Environment generations that did not become tasks, with the reason.",
       ("batch_id", "str", "Batch the generation belonged to."),
       _DOMAIN,
       ("parent_id", "str?", "Task it was asked to vary."),
       ("reason", "str", "Why it was rejected: `parse: ...`, `invalid: ...`, `duplicate of ...`, `near duplicate of ...`."),
       ("env_output", "str", "The raw output.")),
    _s("env_generations", "epochs/NNNN/env_generations.parquet", "parquet", "generate-tasks",
       "Every generation of the environment this epoch, the ones that became tasks and the ones that did not, with "
       "the tokens and logprobs it was sampled with. Absent in runs made before genenv recorded it.",
       ("generation_id", "str", "`<batch_id>/g<k>`, k counting the batch's generations over its rounds."),
       ("batch_id", "str", "The batch: the generations of one conditioning context (a GRPO group of the environment)."),
       ("domain", "str", "Domain name."),
       ("parent_id", "str?", "Task it was asked to vary."),
       ("round", "int", "Generation round (from 1)."),
       ("prompt", "json", "Chat messages the environment was given."),
       ("prompt_token_ids", "list[int]", "Tokens of the rendered prompt (chat template applied)."),
       ("output", "str", "The raw output."),
       ("completion_token_ids", "list[int]", "Sampled tokens, up to and including the end-of-turn token."),
       ("logprobs", "list[float]", "Log-probability of each sampled token under the sampling distribution."),
       ("finish_reason", "str", "`stop` (end of turn) or `length` (generate.max_new_tokens reached)."),
       ("temperature", "float", "Sampling temperature."),
       ("top_p", "float", "Nucleus threshold."),
       ("env_model", "str", "Environment checkpoint that wrote it."),
       ("task_id", "str?", "The task it became (a line of tasks.jsonl); null when it became none."),
       ("reason", "str?", "Why it became no task (as in tasks.rejects.jsonl; `surplus: ...` for a valid one the "
                          "epoch had no room for); null when it became one.")),
    _s("rollouts", "epochs/NNNN/rollouts.parquet", "parquet", "rollout",
       "K agent attempts per task (one row each). With --shard I/N: rollouts.shard-I-of-N.parquet.",
       ("rollout_id", "str", "`<task_id>/s<k>`."),
       ("task_id", "str", "Task attempted."),
       ("batch_id", "str", "The task's batch."),
       _DOMAIN,
       ("sample_index", "int", "k, 0..K-1 within the task's group."),
       ("prompt_token_ids", "list[int]", "Tokens of the rendered prompt (chat template applied)."),
       ("completion", "str", "Decoded completion text."),
       ("completion_token_ids", "list[int]", "Sampled tokens, up to and including the end-of-turn token."),
       ("logprobs", "list[float]", "Log-probability of each sampled token under the sampling distribution."),
       ("finish_reason", "str", "`stop` (end of turn) or `length` (max_new_tokens reached)."),
       ("model", "str", "Agent checkpoint that produced it."),
       ("temperature", "float", "Sampling temperature."),
       ("top_p", "float", "Nucleus threshold (logprobs are of the truncated distribution when below 1)."),
       ("seed", "int", "Sampling seed of the generation call."),
       ("agent_mask", "list[int]?", _MASK_DOC, True, True),
       _TURNS, _END,
       ("reward", "float?", "An episode's R_agent as its environment gave it, which `score` takes instead of grading "
                            "`completion`; null for a single-turn rollout.", True, True),
       ("partial", "float?", "An episode's partial credit; null for a single-turn rollout.", True, True),
       ("valid", "bool?", "Whether the episode's final answer parsed; null for a single-turn rollout.", True, True),
       ("error", "str?", "Why the episode is not a success (null on success and for a single-turn rollout).",
        True, True),
       ("actions", "json?", "The agent's answer of each turn, decoded; null for a single-turn rollout.", True, True),
       ("observations", "json?", "The environment's reply to each action that did not end the episode: one per action "
        "but the last for an episode the environment ended (`done`), one per action for one stopped at the turn cap "
        "(`turn_cap`) or for its context (`context_overflow`); null for a single-turn rollout.",
        True, True),
       ("p_teacher_forced", "float?", "The task's teacher-forced p (curriculum.p_estimator = \"teacher_forced\"): the "
                                      "probability that the agent writes the reference answer and ends it under these "
                                      "sampling settings, the same on every row of the task; written only under that "
                                      "setting.", True, True)),
    _s("scores", "epochs/NNNN/scores.parquet", "parquet", "score",
       "One row per rollout.",
       ("rollout_id", "str", "As in rollouts.parquet."),
       ("task_id", "str", "Task."),
       ("batch_id", "str", "Batch."),
       ("sample_index", "int", "k within the group."),
       ("source", "str", "`seed` or `env`."),
       _DOMAIN,
       ("shape", "str", "Task shape."),
       ("reward", "float", "R_agent in [0, 1] (exact structured match for tool calls)."),
       ("partial", "float", "Partial-credit similarity, recorded but never used as the reward."),
       ("success", "bool", "reward >= curriculum.success_threshold."),
       ("valid", "bool", "The completion parsed and followed the output format."),
       ("error", "str?", "Why it failed to parse or match (null on success); `timed out: ...` when grading it ran past "
                         "`score.item_timeout_s`."),
       ("completion_tokens", "int", "Length of the completion in tokens."),
       ("finish_reason", "str", "As in rollouts.parquet."),
       _TURNS, _END),
    _s("task_stats", "epochs/NNNN/task_stats.parquet", "parquet", "score",
       "One row per task: success rates and the environment's reward.",
       ("task_id", "str", "Task."),
       ("batch_id", "str", "Batch."),
       ("source", "str", "`seed` or `env`."),
       _DOMAIN,
       ("shape", "str", "Task shape."),
       ("attempts", "int", "Rollouts of the task (K)."),
       ("successes", "int", "Successful rollouts."),
       ("p_task", "float", "The task's success rate as curriculum.p_estimator estimates it: successes / attempts "
                           "(rollouts, the default), or p_task_teacher_forced."),
       ("mean_reward", "float", "Mean R_agent over the task's rollouts."),
       ("p_batch", "float", "Successes / attempts over the batch's n x K rollouts; under curriculum.p_estimator = "
                            "\"teacher_forced\" the mean p_task of its tasks."),
       ("r_env", "float", "R_env of p_batch (curriculum.env_reward: exp(-beta (p_batch - alpha)^2) by default, or "
                           "1 - 2|p_batch - alpha|), the same for every task of the batch."),
       ("filtered", "bool", "|p_batch - alpha| > k_min: left out of the environment's training set."),
       ("in_band", "bool", "band_low <= p_task <= band_high."),
       ("informative", "bool", "The task's rewards are not all equal (K >= 2): its GRPO group has a non-zero advantage."),
       ("prompt_tokens", "int", "Length of the agent prompt in tokens (task length)."),
       ("p_task_rollouts", "float?", "successes / attempts, kept beside p_task when p_task is another estimator's "
                                     "(curriculum.p_estimator = \"teacher_forced\"); written only then.", True, True),
       ("p_task_teacher_forced", "float?", "The rollouts' p_teacher_forced, the estimate p_task is under "
                                           "curriculum.p_estimator = \"teacher_forced\"; written only then.", True, True)),
    _s("agent_train", "pools/agent_train/epoch=NNNN.parquet", "parquet", "score",
       "D_train: the epoch's agent traces with everything GRPO needs. `valid` traces are the ones replayed later.",
       ("epoch", "int", "Epoch."),
       ("rollout_id", "str", "Rollout."),
       ("task_id", "str", "Task."),
       ("group_id", "str", "GRPO group (= task_id: the K samples of one task)."),
       ("sample_index", "int", "k within the group."),
       ("source", "str", "`seed` or `env`."),
       _DOMAIN,
       ("prompt_token_ids", "list[int]", "Prompt tokens."),
       ("completion_token_ids", "list[int]", "Completion tokens."),
       ("logprobs", "list[float]", "Behaviour-policy logprobs of the completion tokens."),
       ("reward", "float", "R_agent."),
       ("success", "bool", "Success flag."),
       ("valid", "bool", "Output parsed and followed the schema, and the checker ran."),
       ("finish_reason", "str", "`stop` or `length`."),
       ("temperature", "float", "Sampling temperature of the behaviour policy."),
       ("model", "str", "Behaviour policy (agent checkpoint)."),
       ("agent_mask", "list[int]?", _MASK_DOC, True, True),
       _TURNS, _END),
    _s("env_sft", "pools/env_sft/epoch=NNNN.parquet", "parquet", "score",
       "D_env: the environment's generations with their reward-weighted-regression weights.",
       ("epoch", "int", "Epoch."),
       ("task_id", "str", "Task the generation became."),
       ("batch_id", "str", "Batch."),
       _DOMAIN,
       ("parent_id", "str?", "Task it varied."),
       ("prompt", "json", "Chat messages the environment was given (input)."),
       ("output", "str", "Its raw output (target)."),
       ("p_batch", "float", "The batch's success rate."),
       ("r_env", "float", "Environment reward."),
       ("weight", "float", "exp(lambda * r_env), unnormalised (update-env normalises over what it trains on)."),
       ("kept", "bool", "Passed the difficulty filter (|p_batch - alpha| <= k_min)."),
       ("env_model", "str", "Environment checkpoint that wrote it.")),
    _s("env_gen", "pools/env_gen/epoch=NNNN.parquet", "parquet", "score",
       "Every environment generation of the epoch with its own reward: what `env_update.algo = \"grpo\"` trains on "
       "(and `rwr-task`). Absent for epochs whose generate-tasks predates env_generations.parquet.",
       ("epoch", "int", "Epoch."),
       ("generation_id", "str", "As in env_generations.parquet."),
       ("batch_id", "str", "Batch = the environment's GRPO group (one conditioning context)."),
       ("domain", "str", "Domain name."),
       ("task_id", "str?", "The task it became; null when it became none."),
       ("valid", "bool", "It became a task the agent attempted."),
       ("reason", "str?", "Why it became no task; null when valid."),
       ("p_task", "float?", "Its task's success rate over the K rollouts; null when not valid."),
       ("reward", "float?", "R_env of p_task (curriculum.env_reward) for a valid generation, curriculum.invalid_reward "
                            "(under the uncertainty reward, what p = 0 or 1 earns) for one "
                            "that became no task; null for a surplus one (valid, but never attempted: no reward "
                            "is known, so it is left out of its group) and, under curriculum.duplicate_reward = "
                            "\"neutral\", for a duplicate."),
       ("prompt", "json", "Chat messages the environment was given."),
       ("output", "str", "The raw output."),
       ("prompt_token_ids", "list[int]", "Prompt tokens."),
       ("completion_token_ids", "list[int]", "Completion tokens."),
       ("logprobs", "list[float]", "Sampler logprobs of the completion tokens."),
       ("finish_reason", "str", "`stop` or `length`."),
       ("temperature", "float", "Sampling temperature."),
       ("env_model", "str", "Environment checkpoint that wrote it.")),
    _s("agent_update", "epochs/NNNN/agent_update.parquet", "parquet", "update-agent",
       "What each trace contributed to the agent's GRPO update.",
       ("epoch", "int", "Epoch the trace comes from (earlier than the update's epoch when replayed)."),
       ("rollout_id", "str", "Rollout."),
       ("task_id", "str", "Task."),
       ("group_id", "str", "GRPO group."),
       ("sample_index", "int", "k within the group."),
       ("reward", "float", "R_agent."),
       ("advantage", "float?", "(r - mean_group) / (std_group + 1e-4); null when skipped."),
       ("used", "bool", "Trained on."),
       ("skip_reason", "str?", "`all-equal group`, `singleton group`, `empty completion`, `other temperature`; null when used."),
       ("replay", "bool", "Replayed from an earlier epoch (truncated importance ratio)."),
       ("logp_abs_diff", "float?", "Mean over the completion's tokens of the absolute difference sampler logprob - trainer logprob (nats): "
        "the engine's recorded logprobs against the trainer's forward pass before the update. Null when not "
        "trained on, when replayed, and in files written before the column existed.", True),
       ("sampler_kl", "float?", "KL(sampler ‖ trainer) per token, k3 estimate (r - 1 - log r, r = trainer / "
        "sampler probability), mean over the completion. Null as for `logp_abs_diff`.", True),
       ("truncated_share", "float?", "Share of the completion's tokens whose importance weight trainer / sampler "
        "was truncated at `agent_update.is_cap`. Null as for `logp_abs_diff`.", True)),
    _s("agent_update_steps", "epochs/NNNN/agent_update_steps.parquet", "parquet", "update-agent",
       "The agent's training curve, one row per optimizer step; each number is the step's, over all its "
       "micro-batches and ranks (token means weighted by tokens, the loss by rows), the same in every layout.",
       ("step", "int", "Optimizer step (from 1)."),
       ("pass", "float", "Pass over the data (fractional within a pass)."),
       ("loss", "float", "GRPO loss (surrogate + kl_coef * KL)."),
       ("policy_loss", "float", "Clipped surrogate alone, token mean."),
       ("kl", "float", "Mean per-token KL (k3) to the reference policy; 0 when kl_coef = 0."),
       ("clip_frac", "float", "Share of tokens whose ratio was clipped."),
       ("ratio_mean", "float", "Mean PPO ratio against the old policy (the trainer's logprobs before the update; "
        "a replayed trace's sampler logprobs): exactly 1 at step 1."),
       ("ratio_dev_max", "float?", "Largest absolute deviation of the ratio from 1 over the step's tokens: exactly 0 at step 1; null in files "
        "written before the column existed.", True),
       ("is_weight_mean", "float?", "Mean sampler-mismatch weight min(trainer / sampler, is_cap) over the step's "
        "tokens (1 on replayed ones); null in older files.", True),
       ("is_truncated", "float?", "Share of the step's tokens whose mismatch weight was truncated at is_cap; null "
        "in older files.", True),
       ("grad_norm", "float?", "Gradient norm before clipping."),
       ("learning_rate", "float?", "Learning rate of the step."),
       ("tokens", "float", "Completion tokens in the step, all ranks together.")),
    _s("env_update", "epochs/NNNN/env_update.parquet", "parquet", "update-env",
       "What each environment generation contributed to the update (`env_update.algo`).",
       ("epoch", "int", "Epoch of the pool partition the pair comes from."),
       ("task_id", "str?", "Task the generation became (null: a grpo generation that became none)."),
       ("batch_id", "str", "Batch."),
       ("r_env", "float?", "The reward the update used: the batch's R_env (rwr), the generation's own reward "
                           "(grpo, rwr-task; null for a surplus generation)."),
       ("weight", "float?", "exp(lambda r_env) / sum over the pairs trained on (sums to 1); null under grpo."),
       ("weight_rel", "float?", "weight x number of pairs (mean 1): the factor on the pair's token-mean NLL; null "
                                "under grpo."),
       ("used", "bool", "Trained on."),
       ("skip_reason", "str?", "`filtered`, `outside window`, `empty output`, `not valid` (rwr-task), `all-equal "
                               "group`, `singleton group`, `no reward` (grpo); null when used."),
       ("generation_id", "str?", "grpo and rwr-task: the generation (env_generations.parquet); null under rwr and in "
                                 "files written before the column existed.", True),
       ("advantage", "float?", "grpo: (r - mean_group) / (std_group + 1e-4) over the batch's generations; null "
                               "otherwise.", True),
       ("logp_abs_diff", "float?", "grpo: mean |sampler logprob - trainer logprob| over the generation's tokens "
                                   "(nats), as in agent_update.parquet; null otherwise.", True),
       ("sampler_kl", "float?", "grpo: KL(sampler || trainer) per token, k3 estimate; null otherwise.", True),
       ("truncated_share", "float?", "grpo: share of tokens whose importance weight was truncated at "
                                     "env_update.is_cap; null otherwise.", True)),
    _s("env_update_steps", "epochs/NNNN/env_update_steps.parquet", "parquet", "update-env",
       "The environment's training curve, one row per optimizer step; each number is the step's, over all its "
       "micro-batches and ranks (token means weighted by tokens, the loss and NLL by rows); the last row says "
       "whether kl_max stopped it (the cap compares the step's KL).",
       ("step", "int", "Optimizer step (from 1)."),
       ("loss", "float", "Weighted NLL + kl_coef * KL (rwr, rwr-task); the GRPO loss (grpo)."),
       ("nll", "float?", "Weighted token-mean negative log-likelihood of the targets; null under grpo."),
       ("kl", "float", "Mean per-token KL(current || initial) over the step's target positions, before the step "
                       "(exact over the vocabulary under rwr and rwr-task; the k3 estimate on the sampled tokens "
                       "under grpo)."),
       ("applied", "bool", "False for the step that found the KL past kl_max: it was not taken."),
       ("stopped_by_kl", "bool", "True on the row where the update stopped because the KL passed kl_max."),
       ("grad_norm", "float?", "Gradient norm before clipping."),
       ("learning_rate", "float?", "Learning rate of the step."),
       ("policy_loss", "float?", "grpo: the clipped surrogate alone, token mean; null otherwise.", True),
       ("clip_frac", "float?", "grpo: share of tokens whose ratio was clipped; null otherwise.", True),
       ("is_weight_mean", "float?", "grpo: mean sampler-mismatch weight; null otherwise.", True)),
]}


# The keys of epochs/NNNN/metrics.json (written by `metrics`), described with the run's other files
METRICS_DOCS: dict[str, str] = {
    "tasks": "tasks in tasks.jsonl",
    "env_tasks": "tasks written by the environment",
    "seed_tasks": "seed (base) tasks",
    "valid_generation_rate": "environment generations that became tasks (valid and novel) / all generations",
    "rollouts": "agent rollouts scored (tasks x K)",
    "success_rate": "successful rollouts / rollouts (pooled p-hat)",
    "batch_p_mean": "mean p_batch over the epoch's task batches",
    "band_share": "share of tasks whose p_task is in [band_low, band_high]",
    "env_r_mean": "mean R_env over environment batches",
    "env_batches_kept": "environment batches that passed the difficulty filter",
    "env_batches": "environment task batches scored",
    "env_batch_band_share": "share of environment batches whose p_batch is in [band_low, band_high]",
    "informative_share": "share of GRPO groups (tasks with K >= 2 rollouts) whose rewards are not all equal",
    "env_groups": "the environment's GRPO groups: batches with two generations or more of known reward "
                  "(pools/env_gen; null for epochs that predate it)",
    "env_groups_informative_share": "share of those groups whose generations' rewards are not all equal (the ones "
                                    "env_update.algo = \"grpo\" learns from)",
    "env_reward_valid": "mean reward of the environment's generations that became tasks, R_env of p_task (curriculum.env_reward)",
    "env_reward_invalid": "mean reward of its generations that became no task (curriculum.invalid_reward); null when "
                          "every generation became a task",
    "env_shape_mix": "mapping: shape -> share of the environment's tasks of that shape",
    "shape_success": "mapping: shape -> {p: pooled success, tasks, informative: share of informative groups}",
    "shape_success_by_source": "mapping: source (seed, env) -> shape -> {p: success, tasks}: shape_success for the "
                               "seed tasks and the environment's tasks apart",
    "mean_prompt_tokens": "mean agent prompt length in tokens (task length)",
    "mean_completion_tokens": "mean agent completion length in tokens",
    "agent_train_reward": "mean reward of the epoch's on-policy traces (the agent's training reward)",
    "agent_loss": "mean GRPO loss over update-agent's steps",
    "agent_kl": "mean KL of the agent to its reference over update-agent's steps",
    "agent_logp_mismatch": "mean absolute difference between the sampler's and the trainer's logprob per completion token (nats), over the "
                           "on-policy samples update-agent trained on",
    "agent_sampler_kl": "KL(sampler ‖ trainer) per completion token (k3 estimate), same samples",
    "agent_is_truncated": "share of those tokens whose importance weight trainer / sampler was truncated at "
                          "agent_update.is_cap",
    "env_loss": "mean loss over update-env's steps: the weighted SFT loss (env_update.algo rwr, rwr-task) or the GRPO "
                "loss (grpo)",
    "env_kl": "mean per-token KL of the environment to the initial model, on update-env's last batch before its step (or "
              "the KL that stopped it): exact over the vocabulary (rwr, rwr-task), the k3 estimate on the sampled "
              "tokens (grpo)",
    "env_kl_stopped": "true when update-env stopped because the KL passed env_update.kl_max",
    "heldout_success": "eval-agent: the epoch's agent's success rate on the held-out seeds (a fraction; "
                       "run.eval_limit items of them); null when the epoch was not evaluated (run.eval_every) or "
                       "heldout is not in run.eval_benches",
    "evals": "eval-agent: mapping benchmark -> its headline score (as `genenv evaluate` reports it, in %) of the "
             "epoch's agent, for each of run.eval_benches; null when the epoch was not evaluated",
    "by_domain": "mixed runs only (null otherwise): mapping domain -> {tasks, seed_tasks, env_tasks, generations, "
                 "accepted, valid_generation_rate (generate-tasks); rollouts, successes, success_rate, in_band, "
                 "band_share, groups, informative, informative_share, env_batches, env_r_mean (score)}; the counts "
                 "add up over the domains to the epoch's",
}


# ---------------------------------------------------------------- docs

MARKER = "<!-- generated below by `python -m genenv_cli.rundir --write docs/pools.md`; edit rundir/schemas.py, not this -->"


def markdown_tables() -> str:
    """The per-file column tables of docs/pools.md, and the keys of metrics.json."""
    out = []
    for s in SCHEMAS.values():
        out.append(f"### `{s.path}`\n\n{s.doc} Format: {s.format}. Written by `{s.writer}`.\n")
        out.append("| column | type | meaning |\n|---|---|---|")
        for c in s.columns:
            out.append(f"| `{c.name}` | {c.type} | {c.doc} |")
        out.append("")
    out.append("### `epochs/NNNN/metrics.json`\n\nThe epoch's numbers, rewritten after each of its stages "
               "(null until the stage that produces a number has run). Also: `epoch`, `alpha`, `band_low`, "
               "`band_high`.\n")
    out.append("| key | meaning |\n|---|---|")
    out.extend(f"| `{k}` | {v} |" for k, v in METRICS_DOCS.items())
    out.append("")
    return "\n".join(out)

