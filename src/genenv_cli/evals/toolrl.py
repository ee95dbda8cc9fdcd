"""ToolRL's system-prompt layout (qiancheng0/ToolRL, the evaluation the GenEnv paper follows for API-Bank and
Bamboogle): an introduction, the tools, the steps of a turn, the output format, and notes. Shared by the
`--protocol paper` prompts of api_bank/prompts.py and bamboogle/benchmark.py, which fill in the parts that differ."""

INTRO = ("You are a helpful multi-turn dialogue assistant capable of leveraging tool calls to solve user tasks and "
         "provide structured chat responses.")

STEPS = """**Steps for Each Turn**
1. **Think:** Recall relevant context and analyze the current user goal.
2. **Decide on Tool Usage:** If a tool is needed, specify the tool and its parameters.
3. **Respond Appropriately:** If a response is needed, generate one while maintaining consistency across user \
queries."""


def system_prompt(tools: str, output_format: str, notes: str) -> str:
    """INTRO, **Available Tools** (`tools`), STEPS, **Output Format** (`output_format`, fenced), **Important Notes**."""
    return (f"{INTRO}\n\n**Available Tools**\n{tools}\n\n{STEPS}\n\n**Output Format**\n```plaintext\n"
            f"{output_format}\n```\n\n**Important Notes**\n{notes}")
