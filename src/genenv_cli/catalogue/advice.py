"""What to change when an update had nothing to learn from, named by the settings that change it: said by the
update that found it (a warning) and by `genenv status` (its note on the stage)."""

from __future__ import annotations

from typing import Any


def all_equal_advice(cfg: Any, multi_turn: list[str]) -> str:
    """Why every GRPO group was all-equal, and the settings that make a group's rewards differ. `multi_turn`: the
    run's multi-turn domains (their reward is the episode's end, so a group differs only when some episodes
    succeed and others do not).

    >>> from genenv_cli.catalogue.config import Config
    >>> print(all_equal_advice(Config(), ["calc"]))  # doctest: +ELLIPSIS
    every GRPO group's 8 rewards were equal...for calc: an episode's reward is its end...
    """
    k = cfg.rollout.group_size
    parts = [f"every GRPO group's {k} rewards were equal, so the agent had nothing to learn from. A group trains "
             f"only when its samples differ:",
             f"a larger rollout.group_size (now {k}" + ("; at K = 2 both samples must differ" if k <= 2 else "")
             + ")",
             f"rollout.temperature near 1 or above (now {cfg.rollout.temperature:g})",
             "tasks nearer the agent's ability (the environment aims at curriculum.alpha once it is trained; "
             "generate.seed_share sets how many seed tasks each epoch keeps)"]
    if multi_turn:
        parts.append(f"for {', '.join(multi_turn)}: an episode's reward is its end (1 when the environment ends it "
                     f"solved, 0 at the turn cap), so a rollout.max_new_tokens that fits one whole answer per turn "
                     f"(now {cfg.rollout.max_new_tokens}) and a model that can finish within the domain's max_turns "
                     f"are what let some episodes of a group succeed")
    return parts[0] + " " + "; ".join(parts[1:]) + "."
