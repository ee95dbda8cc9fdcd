"""Reading the command out of a model's turn in ALFWorld, and the rules by which it is sent to the game.

Where the command is: the text inside the first `<action>...</action>` if any; else the rest of the first line that
starts with "ACTION:" (any case, optionally after "> "); else the first non-empty line.

How it is sent (`evaluate.alfworld_commands`, recorded in every result):
- `exact` (the default; ALFWorld's official protocol): as ReAct's ALFWorld loop passes the model's text to the
  game, `.strip()`ped and nothing more (a leading ">" prompt marker, the form of a ReAct log's command lines, is
  dropped too). ALFWorld's own environment matches commands exactly: "Go to desk 1", "go to desk 1." and
  "go to  desk 1" all get "Nothing happens.", and so they do here.
- `lenient`: a leading ">" marker, surrounding quotes or backticks and one trailing "." removed, runs of whitespace
  made one space, and the result matched to an admissible command ignoring case (its admissible spelling sent);
  anything else sent as is. Scores under this rule are higher than ALFWorld's own for the same answers and do not
  compare with published ones.

The paper protocol's step accuracy compares the leniently read command with the expert's ignoring case and spacing
(`normalize`), as its decomposition defines it; the training domains read commands leniently too.
"""

from __future__ import annotations

import re

from genenv_cli.core.callparse import CallParseError, load_json

COMMAND_RULES = ("exact", "lenient")

# the first <action>...</action> (any case), found as re.search(r"<action>(.*?)</action>", re.I | re.S) finds it, but
# by two searches: the leftmost opening tag has a closing one after it or none has, and the single regex would
# rescan the rest of the text from every unclosed opening tag (quadratic on a run of `<action>`)
_ACTION_OPEN = re.compile(r"<action>", re.IGNORECASE)
_ACTION_CLOSE = re.compile(r"</action>", re.IGNORECASE)
_ACTION_LINE = re.compile(r"^\s*(?:>\s*)?action\s*:\s*(.*)$", re.IGNORECASE)


def _clean(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^>+\s*", "", text)
    text = text.strip().strip("`\"'").strip()
    if text.endswith("."):
        text = text[:-1]
    return " ".join(text.split())


MAX_TURN_LINES = 1000  # over 4,000 tokens of lines, past evaluate's default of 512 per turn


def _locate(output: str) -> str:
    """The text of a model turn that holds its command: inside the first `<action>` tag, else after the first
    `ACTION:` line's colon, else the first non-empty line; "" when there is none."""
    m = _ACTION_OPEN.search(output)
    end = _ACTION_CLOSE.search(output, m.end()) if m else None
    if m and end:
        return output[m.end():end.start()]
    if "action" in output.lower():
        # a turn's `Action:` line is among its first (ReAct's turn: a thought, then the action); reading at most
        # MAX_TURN_LINES keeps a degenerate turn of a million lines from costing a Python step per line
        for line in output.splitlines()[:MAX_TURN_LINES]:
            m = _ACTION_LINE.match(line)
            if m:
                return m.group(1)
    rest = output.lstrip()  # the first non-empty line (its own blanks are stripped by the readers)
    return rest.splitlines()[0] if rest else ""


def parse_action(output: str) -> str:
    """One command from a model turn, read leniently: located as `_locate` does, then a leading ">" marker,
    surrounding quotes or backticks and one trailing "." removed and runs of whitespace made one space (the paper
    protocol, the training domains and the `lenient` rule); "" when there is none."""
    return _clean(_locate(output))


def exact_command(output: str) -> str:
    """One command from a model turn as ReAct passes it to ALFWorld (`llm(...).strip()`): located as `_locate`
    does, stripped of surrounding whitespace and of a leading ">" prompt marker (a ReAct log's "> go to desk 1"),
    otherwise as written: case, punctuation and inner spacing are the model's."""
    return re.sub(r"^>+\s*", "", _locate(output).strip()).strip()


def command_of(output: str, rule: str, admissible: list[str]) -> str:
    """The command sent to the game for a model turn under `rule` (COMMAND_RULES)."""
    if rule == "exact":
        return exact_command(output)
    if rule == "lenient":
        return resolve(parse_action(output), admissible)
    raise ValueError(f"unknown ALFWorld command rule {rule!r}; expected one of {', '.join(COMMAND_RULES)}")


def parse_action_list(output: str) -> list[str]:
    """An episode's commands from a predictions output: a JSON list of strings, else one per non-empty line
    (only the lines starting with ">" when there are some: a ReAct-style log with observations between)."""
    return [parse_action(a) for a in action_items(output)]


def action_items(output: str) -> list[str]:
    """parse_action_list's items before each is read as an action (scoring reads only as many as it plays)."""
    text = output.strip()
    if text.startswith("["):
        try:
            obj = load_json(text, "action list")  # bounded: a degenerate answer is no list, never a crash
        except CallParseError:
            obj = None
        if isinstance(obj, list) and all(isinstance(a, str) for a in obj):
            return obj
    lines = [line for line in text.splitlines() if line.strip()]
    marked = [line for line in lines if line.lstrip().startswith(">")]
    return marked or lines


def normalize(command: str) -> str:
    return " ".join(command.split()).casefold()


def resolve(action: str, admissible: list[str]) -> str:
    """The admissible command equal to `action` ignoring case and spacing, else `action` unchanged."""
    by_key = {normalize(c): c for c in admissible}
    return by_key.get(normalize(action), action)
