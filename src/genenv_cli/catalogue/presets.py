"""Named presets for `genenv init --preset NAME`: settings applied like `--set` overrides (a `--set` given
alongside still wins), each marked as stated by the source it reproduces or chosen by us where it is silent.

A preset is data. `paper` is the GenEnv paper's training protocol (Table 2 and its setup section); what the
paper does not state is listed under `ours`, so a run's config says which numbers are the paper's.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

from genenv_cli.core.errors import ConfigError

PAPER_MODEL = "Qwen/Qwen2.5-7B-Instruct"
PAPER_TRAIN = "accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml --num_processes 8 -m genenv_cli"
LAUNCH_NOTE = f'TRAIN="{PAPER_TRAIN}" pipelines/paper.sh RUN (pipelines/paper.sh uses it when TRAIN is unset)'


@dataclass(frozen=True)
class Preset:
    name: str
    about: str
    stated: dict[str, object]                      # SECTION.KEY -> value the source states
    ours: dict[str, object]                        # SECTION.KEY -> value we chose where the source is silent
    stated_notes: list[str] = field(default_factory=list)   # stated settings that are not config keys
    ours_notes: list[str] = field(default_factory=list)


PRESETS: dict[str, Preset] = {
    "paper": Preset(
        name="paper",
        about="the GenEnv paper's protocol (arXiv 2512.19682, Table 2)",
        stated={
            "curriculum.alpha": 0.5,
            "curriculum.k_min": 0.1,
            "curriculum.lam": 1.0,
            "agent_update.learning_rate": 1e-6,
            "env_update.learning_rate": 5e-7,
            "generate.tasks_per_epoch": 64,
            "vllm.max_model_len": 9000,
            "agent.model": PAPER_MODEL,
            "env.model": PAPER_MODEL,
            "env.mode": "genenv",
        },
        ours={
            "curriculum.beta": 2.0,
            "rollout.group_size": 8,
            "generate.variations": 4,
            "generate.temperature": 0.7,
            "rollout.temperature": 1.0,
            "agent_update.lora": False,
            "env_update.lora": False,
            "agent_update.kl_coef": 0.001,
            "env_update.kl_coef": 0.1,
            "rollout.max_new_tokens": 1024,
            "agent_update.gradient_checkpointing": True,
            "env_update.gradient_checkpointing": True,
            "run.sharding": "fsdp",
            "run.keep_checkpoints": 1,
            "run.keep_checkpoints_every": 5,
        },
        stated_notes=["10 epochs (pipelines/paper.sh runs EPOCHS=10 unless told otherwise)",
                      "the vLLM engine for generation (run.engine stays auto: vLLM wherever it is installed with a GPU)"],
        ours_notes=["full fine-tuning rather than LoRA, the group size K, beta, the KL terms, the sampling "
                    "temperatures and the completion length are not given by the paper; full fine-tuning because "
                    "the paper's learning rates are full fine-tuning rates (with a LoRA adapter an update at 1e-6 "
                    "leaves the policy where it was: experiments/README.md). On one GPU: "
                    "--set agent_update.lora=true --set env_update.lora=true with a LoRA learning rate",
                    "full fine-tuning of two 7B models is sharded (run.sharding = fsdp): train with " + LAUNCH_NOTE],
    ),
}

PAPER_EPOCHS = 10


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; the presets are: {', '.join(sorted(PRESETS))}.")
    return PRESETS[name]


def vllm_installed() -> bool:
    """Whether vllm can be imported here, found without importing it (that would pull in torch)."""
    return importlib.util.find_spec("vllm") is not None


def preset_overrides(preset: Preset, engine_available: bool) -> tuple[list[str], list[str]]:
    """The preset as `--set` strings (theirs, then ours, then the engine) and the notes to show and record."""
    sets = [f"{k}={_text(v)}" for k, v in {**preset.stated, **preset.ours}.items()]
    notes: list[str] = []
    if preset.name == "paper":
        # run.engine stays auto: a config written on a machine without vLLM still generates with vLLM on the GPU
        # machine that has it
        notes.append("launch the training stages sharded: " + LAUNCH_NOTE)
        if not engine_available:
            notes.append("vllm is not importable here; run.engine stays auto, so the GPU machine generates with vLLM "
                         "once it is installed there (pip install 'genenv-cli[vllm]')")
    return sets, notes


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def preset_header(preset: Preset, notes: list[str], overridden: list[str]) -> str:
    """Comment lines for genenv.toml saying what the preset set, whose each number is, and what --set changed."""
    lines = [f"# preset: {preset.name}, {preset.about}.",
             "# Stated by the source: " + ", ".join(f"{k} = {_text(v)}" for k, v in preset.stated.items()) + "."]
    lines += [f"#   also stated: {n}." for n in preset.stated_notes]
    lines.append("# Ours, where the source is silent: " + ", ".join(f"{k} = {_text(v)}" for k, v in preset.ours.items())
                 + ".")
    lines += [f"#   {n}." for n in preset.ours_notes]
    lines += [f"# note: {n}." for n in notes]
    if overridden:
        lines.append("# changed by --set at init: " + ", ".join(overridden) + ".")
    return "\n".join(lines) + "\n"
