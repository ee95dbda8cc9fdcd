"""The prompts. Official: `evaluator.py`'s chat layout: a system message with its API-call instruction (output
`[ApiName(key1='value1', key2='value2', ...)]`, "This year is 2023") followed by the API descriptions, one
JSON object per line (`{"name", "description", "input_parameters", "output_parameters"}`, as
`ToolManager.get_api_description`); then the history: User -> user, AI -> assistant, API -> a system
message `[ApiName(key='value', ...)] Response: <output>`. Level 1 describes every API the dialogue uses;
levels 2 and 3 describe only ToolSearcher (the model must search first). The descriptions are read from the
release's `apis/*.py` (parsed with `ast`, literal class attributes only, never imported); without that
folder, from ToolSearcher results seen in the data, else a stub naming the parameters the data uses. An API a
dialogue's own ToolSearcher call returned is described as that result describes it (level 3's APIs differ
from level 1/2's of the same name). `EvalSample.tools` holds the same APIs as OpenAI-style function schemas,
for export only: the descriptions are already in the system message.

Paper protocol (ToolRL's layout, `toolrl.py`): the tools offered listed as `N. Name: / Description: /
Parameters:`, the history in one user message (README.md beside this file gives the whole protocol).
"""

from __future__ import annotations

import json
from typing import Any

from genenv_cli.evals import toolrl
from genenv_cli.families.api_bank.release_files import _Point

# The official chat prompt (evaluator.py's api_call_prompt), followed by the API descriptions.
OFFICIAL_PROMPT = """Based on the given API description and the existing conversation history 1..t, please \
generate the API request that the AI should call in step t+1 and output it in the format of \
[ApiName(key1='value1', key2='value2', ...)], replace the ApiName with the actual API name, and replace the key \
and value with the actual parameters.
Your output should start with a square bracket "[" and end with a square bracket "]". Do not output any other \
explanation or prompt or the result of the API call in your output.
This year is 2023.
Input:
User: [User's utterence]
AI: [AI's utterence]

Expected output:
[ApiName(key1='value1', key2='value2', ...)]

API descriptions:
"""

# ToolRL's system prompt (tools listed, think / tool_call / response output format); {tools} is filled per item.
PAPER_SYSTEM = toolrl.system_prompt(
    "In your response, you can use the following tools:\n{tools}",
    """<think> Your thoughts and reasoning </think>
<tool_call>
{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter content", "... ...": "... ..."}}}}
{{"name": "... ...", "parameters": {{"... ...": "... ...", "... ...": "... ..."}}}}
...
</tool_call>
<response> AI's final response </response>""",
    """1. You must always include the `<think>` field to outline your reasoning. Provide at least one of \
`<tool_call>` or `<response>`. Decide whether to use `<tool_call>` (possibly multiple times), `<response>`, or both.
2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each tool call should be a JSON \
object with a "name" field and a "parameters" field containing a dictionary of parameters. If no parameters are \
needed, leave the "parameters" field an empty dictionary.
3. Refer to the previous dialogue records in the history, including the user's queries, previous `<tool_call>`, \
`<response>`, and any tool feedback noted as `<obs>` (if exists).""")

PAPER_FINAL_USER = "<user> Based on our conversation above, please only make one tool call to solve my need.</user>"


def _call_text(name: str, params: dict[str, Any]) -> str:
    return "[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in params.items()))


def _result_output(turn: dict[str, Any]) -> Any:
    return (turn.get("result") or {}).get("output")


def _doc(point: _Point, docs: dict[str, dict[str, Any]], api: str) -> dict[str, Any]:
    """The doc of `api` as this dialogue's ToolSearcher returned it, else the catalog's (level 3 has its own
    APIs, some named like level-1/2 ones)."""
    return point.found_docs.get(api) or docs[api]


def _official_messages(point: _Point, docs: dict[str, dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    offered = list(point.dialogue_apis) if point.level == "level-1" else ["ToolSearcher"]
    desc = "\n".join(json.dumps(docs[a] if point.level == "level-1" else _doc(point, docs, a)) for a in offered)
    messages = [{"role": "system", "content": OFFICIAL_PROMPT + desc}]
    if point.requirement is not None:
        messages.append({"role": "user", "content": point.requirement})
    for t in point.history:
        if t["role"] == "User":
            messages.append({"role": "user", "content": t["text"]})
        elif t["role"] == "AI":
            messages.append({"role": "assistant", "content": t["text"]})
        else:
            messages.append({"role": "system", "content": "{} Response: {}".format(
                _call_text(t["api_name"], t["param_dict"]), str(_result_output(t)))})
    return messages, offered


def _paper_messages(point: _Point, docs: dict[str, dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    offered = [a for a in dict.fromkeys([*point.found_docs, *point.dialogue_apis]) if a != "ToolSearcher"]
    tools = "\n".join(f"{i}. Name: {a}\nDescription: {_doc(point, docs, a).get('description', '')}\n"
                      f"Parameters: {_doc(point, docs, a).get('input_parameters', {})}" for i, a in enumerate(offered, 1))
    lines = ["**Dialogue Records History**"]
    if point.requirement is not None:
        lines.append(f"<user>{point.requirement}</user>")
    for t in point.history:
        if t["role"] == "User":
            lines.append(f"<user>{t['text']}</user>")
        elif t["role"] == "AI":
            lines.append(f"<response>{t['text']}</response>\n")
        elif t["api_name"] != "ToolSearcher":
            call = json.dumps({"name": t["api_name"], "parameters": t["param_dict"]}, ensure_ascii=False)
            lines.append(f"<tool_call>\n{call}\n</tool_call>\n<obs> {_result_output(t)} </obs>")
    user = "\n".join(lines).rstrip("\n") + "\n\n" + PAPER_FINAL_USER + "\n"
    return [{"role": "system", "content": PAPER_SYSTEM.format(tools=tools)}, {"role": "user", "content": user}], offered
