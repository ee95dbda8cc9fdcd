"""The prompt, as BFCL's prompt mode writes it with its default system prompt
(`ret_fmt=python&func_doc_fmt=json&prompt_fmt=plaintext&style=classic`).

One system message: BFCL's instructions (kept in BFCL's own words, since the wording is part of the protocol:
answer only with `[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]`,
point out when no function fits or parameters are missing) followed by "Here is a list of functions in json
format that you can invoke." and the function documents (`json.dumps(indent=4)`; v3 printed the Python list
instead, and so does genenv for v3). Each document's description gets BFCL's language note ("Note that the
provided function is in Python 3 syntax." / Java 8 SDK / JavaScript); for Java and JavaScript every parameter
is shown as type "string" with its real type named in its description, as BFCL does. A system message in the
question (live data) is appended after a blank line; then the question's messages. `EvalSample.tools` holds
the same (annotated) documents for export; they are already in the prompt (`meta["tools_in_prompt"]`), so a
runner should not hand them to the chat template again.
"""

from __future__ import annotations

import copy
import json

_INSTRUCTIONS = [
    # BFCL's "classic" prompt style, plaintext template; its wording is kept (see the docstring above).
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. "
    "If none of the functions can be used, point it out. If the given question lacks the parameters "
    "required by the function, also point it out.",
    "You should only return the function calls in your response.",
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]. "
    "You SHOULD NOT include any other text in the response.",
    "At each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of "
    "your ability. Once you have no more functions to call, the system will consider the current turn "
    "complete and proceed to the next turn or task.",
]


def system_prompt(functions: list[dict], version: str = "v4") -> str:
    """BFCL's default prompt-mode system prompt with the (already annotated) function documents."""
    listing = json.dumps(functions, indent=4) if version != "v3" else str(functions)
    tools = f"Here is a list of functions in {'JSON' if version == 'v3' else 'json'} format that you can invoke.\n{listing}\n"
    return "\n\n".join([*_INSTRUCTIONS, tools])


_HINT = {"python": " Note that the provided function is in Python 3 syntax.",
         "java": " Note that the provided function is in Java 8 SDK syntax.",
         "javascript": " Note that the provided function is in JavaScript syntax."}


def annotate_functions(functions: list[dict], language: str) -> list[dict]:
    """The documents as BFCL shows them: a language note on each description; for Java/JavaScript every
    parameter becomes type "string" with its real type (and element type / dict schema) in its description."""
    docs = copy.deepcopy(functions)
    noun = "Java" if language == "java" else "JavaScript"
    for doc in docs:
        doc["description"] = str(doc.get("description", "")) + _HINT[language]
        if language == "python":
            continue
        props = (doc.get("parameters") or {}).get("properties") or {}
        for spec in props.values():
            kind = spec.get("type")
            spec["description"] = str(spec.get("description", ""))
            if kind == "any":
                spec["description"] += f" This parameter can be of any type of {noun} object in string representation."
            else:
                spec["description"] += f" This is {noun} {kind} type parameter in string representation."
            list_kinds = ("ArrayList", "Array") if language == "java" else ("array",)
            if kind in list_kinds and "items" in spec:
                spec["description"] += (f" The list elements are of type {spec['items'].get('type')}; they are "
                                        f"not in string representation.")
                del spec["items"]
            if language == "javascript" and kind == "dict" and "properties" in spec:
                spec["description"] += (" The dictionary entries have the following schema; they are not in "
                                        f"string representation. {json.dumps(spec['properties'])}")
                del spec["properties"]
            spec["type"] = "string"
    return docs


def prompt_messages(question_turn: list[dict], functions: list[dict], version: str) -> list[dict[str, str]]:
    """System prompt (merged with the question's own system message, as BFCL does) + the turn's messages."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in question_turn]
    head = system_prompt(functions, version)
    if msgs and msgs[0]["role"] == "system":
        msgs[0]["content"] = head + "\n\n" + msgs[0]["content"]
    else:
        msgs.insert(0, {"role": "system", "content": head})
    return msgs
