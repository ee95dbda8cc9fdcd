"""BFCL (Berkeley Function Calling Leaderboard), v4 (default) and v3 data: the single-turn AST categories
scored by BFCL's AST checker rules, and the GenEnv paper's per-turn decomposition of `multi_turn_long_context`.

The data, the protocol and the official sources followed: README.md beside this file. One module per concern:
`categories`, `data`, `prompts`, `calls` (a decoded call), `decode` and `decode_java_js` (reading an answer),
`values` (BFCL's Java/JavaScript type converters), `ast_checker` (the verdict), `scoring`, `summary`,
`multi_turn` (the paper protocol) and `benchmark` (the `BFCL` class, all the registry needs).
"""

from genenv_cli.families.bfcl.benchmark import BFCL

__all__ = ["BFCL"]
