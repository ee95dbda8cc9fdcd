"""ALFWorld's prompt (described in `benchmark.py`): the system message, the observation as the agent sees it, and
one user turn with the admissible commands."""

from __future__ import annotations

from genenv_cli.families.alfworld.games import WELCOME

SYSTEM_PROMPT = (
    "Interact with a household to solve a task. You are an agent in a household environment. At the start you "
    "are given a description of the room and the task to accomplish. Each turn you are also given the list of "
    "AVAILABLE ACTIONS: choose exactly one of them and answer with it on one line, in this format:\n"
    "ACTION: <one of the available actions>\n"
    "The environment then tells you what happened. If it answers \"Nothing happens.\", your action was not "
    "valid; choose another one. The episode ends when the task is done or after {max_steps} actions."
)


def process_observation(obs: str, first: bool = False) -> str:
    """The text shown to the agent: the opening without TextWorld's banner (as ReAct's loop does), and the
    "You arrive at loc N. " prefix of older ALFWorld releases dropped (ReAct's process_ob)."""
    obs = obs.strip("\n")
    if first and obs.lstrip().startswith(WELCOME):
        obs = "\n".join(obs.split("\n\n")[1:])
    if obs.startswith("You arrive at loc "):
        obs = obs[obs.find(". ") + 2:]
    return obs.strip()


def user_turn(obs: str, admissible: list[str] | None, first: bool = False) -> str:
    """One user turn: the observation (the first one introduced as the task) and, when given, the admissible
    commands."""
    text = f"Here is your task.\n{obs}" if first else obs
    if admissible:
        text += "\n\nAVAILABLE ACTIONS:\n" + "\n".join(admissible)
    return text
