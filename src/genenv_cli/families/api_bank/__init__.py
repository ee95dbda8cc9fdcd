"""API-Bank (Li et al., EMNLP 2023): API-call accuracy on the level-1/2 dialogues (level 3 when given).

The data, the protocols (official and the paper's ToolRL protocol) and the official sources followed: README.md
beside this file. One module per concern: `data` (finding and reading the files), `apis` (the API
descriptions), `prompts`, `parsing`, `scoring`, `summary` and `benchmark` (the `APIBank` class, all the
registry needs).
"""

from genenv_cli.families.api_bank.benchmark import APIBank

__all__ = ["APIBank"]
