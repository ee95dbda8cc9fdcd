"""The arms of the experiments, as the settings each adds to the common ones: the curriculum experiment's and the
environment-only experiment's. The experiments run them (experiments/), the epoch profiles replay them
(benchmarks/speed/); both read them here."""

from __future__ import annotations

# Sized for a 2-core CPU: about 3 minutes an epoch of one arm, evaluation included. The learning rates are for
# LoRA on a 135M model (the paper's 1e-6 / 5e-7 are for full fine-tuning of 7B models, and move a LoRA adapter
# nowhere in a few dozen steps); they were chosen on the `seeds` arm alone (a pilot with a seed not reported)
# and are the same for every arm.
COMMON = [
    "curriculum.alpha=0.5", "curriculum.k_min=0.1", "curriculum.lam=1.0", "curriculum.beta=2.0",
    "generate.tasks_per_epoch=48", "generate.variations=4", "generate.seed_share=0.25", "generate.max_rounds=3",
    "generate.max_new_tokens=24", "generate.batch_size=64", "generate.static_variations=5",
    "rollout.group_size=8", "rollout.max_new_tokens=16", "rollout.batch_size=64",
    "agent_update.lora=true", "agent_update.learning_rate=1e-4", "agent_update.passes=2",
    "agent_update.batch_size=16", "env_update.lora=true", "env_update.learning_rate=1e-4",
    "env_update.passes=2", "env_update.batch_size=8",
    "evaluate.temperature=0.0", "evaluate.max_new_tokens=16", "evaluate.batch_size=64",
]

CURRICULUM = {
    "genenv": ["env.mode=genenv"],
    "frozen": ["env.mode=frozen"],
    "static": ["env.mode=static"],
    "seeds": ["env.mode=seeds"],
    "genenv-kmin0.2": ["env.mode=genenv", "curriculum.k_min=0.2"],
    "genenv-lr1e-3": ["env.mode=genenv", "env_update.learning_rate=1e-3"],
    "genenv-var2": ["env.mode=genenv", "generate.variations=2"],
}

_CONTROL_UPDATE = ["env.mode=genenv", "agent.mode=frozen", "env_update.algo=grpo", "curriculum.duplicate_reward=neutral",
                   "env_update.learning_rate=1e-3", "env_update.passes=1"]

ENV_ONLY = {
    "env-only": ["env.mode=genenv", "agent.mode=frozen"],
    "env-only-kmin0.2": ["env.mode=genenv", "agent.mode=frozen", "curriculum.k_min=0.2"],
    "env-only-frozen": ["env.mode=frozen", "agent.mode=frozen"],
    # departures (run only when named; reported beside the rest, never as the headline)
    "env-only-lr1e-3": ["env.mode=genenv", "agent.mode=frozen", "env_update.learning_rate=1e-3"],
    "env-only-var2": ["env.mode=genenv", "agent.mode=frozen", "generate.variations=2"],
    "env-only-frozen-var2": ["env.mode=frozen", "agent.mode=frozen", "generate.variations=2"],
    "env-only-grpo": ["env.mode=genenv", "agent.mode=frozen", "env_update.algo=grpo"],
    "env-only-rwr-task": ["env.mode=genenv", "agent.mode=frozen", "env_update.algo=rwr-task", "env_update.window=1",
                          "curriculum.lam=10"],
    # R-Zero's challenger reward, 1 - 2|p - alpha| with no task earning what p = 0 or 1 earns, learnt by GRPO, and a
    # duplicate left out of its group (the one-digit frontier shapes have about 100 exercises each); the update the
    # positive control (experiments/env_control.py, control-lr1e-3) moved: learning rate 1e-3, one pass
    "env-only-uncertainty": ["env.mode=genenv", "agent.mode=frozen", "env_update.algo=grpo",
                             "curriculum.env_reward=uncertainty", "curriculum.duplicate_reward=neutral",
                             "env_update.learning_rate=1e-3", "env_update.passes=1"],
    # issue 49's arms, at the control's update (GRPO, learning rate 1e-3, one pass, duplicates neutral): the agent's
    # p of each task from one teacher-forced pass (curriculum.p_estimator, docs/curriculum.md) with R-Zero's reward
    # (a) and with the paper's exp reward at beta 2 (a-exp); that p with Binomial(K = 8) noise drawn on it (b); each
    # paired with the untrained environment under the same estimator (its prompts carry the agent's statistics,
    # which the estimator shapes). Arm c is env-only-uncertainty (real rollouts at K = 8), paired with
    # env-only-frozen-rerun: env-only-frozen made again at the same commit, so that epoch 1 is the same batch
    "env-only-tf-uncertainty": [*_CONTROL_UPDATE, "curriculum.p_estimator=teacher_forced",
                                "curriculum.env_reward=uncertainty"],
    "env-only-tf-exp": [*_CONTROL_UPDATE, "curriculum.p_estimator=teacher_forced", "curriculum.env_reward=exp",
                        "curriculum.beta=2.0"],
    "env-only-tf-binomial": [*_CONTROL_UPDATE, "curriculum.p_estimator=teacher_forced_binomial",
                             "curriculum.env_reward=uncertainty"],
    "env-only-frozen-tf": ["env.mode=frozen", "agent.mode=frozen", "curriculum.p_estimator=teacher_forced"],
    "env-only-frozen-rerun": ["env.mode=frozen", "agent.mode=frozen"],
}
# each trained arm's untrained baseline where it is not env-only-frozen (experiments/env_only.py pairs them by seed)
ENV_ONLY_BASELINE = {"env-only-var2": "env-only-frozen-var2", "env-only-tf-uncertainty": "env-only-frozen-tf",
                     "env-only-tf-exp": "env-only-frozen-tf", "env-only-tf-binomial": "env-only-frozen-tf"}


def arm_settings(arm: list[str], seed: int, model: str, extra: list[str]) -> list[str]:
    """Every `--set` of one run of an arm: the seed and models, the common settings, `extra`, then the arm's own."""
    return [f"run.seed={seed}", f"agent.model={model}", f"env.model={model}", *COMMON, *extra, *arm]
