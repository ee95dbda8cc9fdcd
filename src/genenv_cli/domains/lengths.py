"""Per-domain default output lengths: what a domain's items and answers need, in tokens.

A benchmark's real items are much longer than the toy domains' (a BFCL live_multiple item, written as the
environment must write it, has a median of ~950 SmolLM2 tokens), so the generic 256 cuts the environment off
before its JSON closes. These values replace the generic default of a setting the user did not set (neither
in genenv.toml nor with --set; a preset's value counts as set); a mixed run takes the largest over its domains.
They are the 99th percentile over the release files, rounded up to the next multiple of 256, measured with
`benchmarks/speed/output_lengths.py` (docs/domains.md has the figures and the command). Kept free of imports: the
config reads it on every command.
"""

from __future__ import annotations

DOMAIN_DEFAULTS: dict[str, dict[str, int]] = {
    # 99th percentile over BFCL's 12 AST/irrelevance files (bfcl-eval 2026.3.23): items 2,415 tokens, answers 156
    "bfcl": {"generate.max_new_tokens": 2560},
    # 99th percentile over API-Bank's level-1/2 dialogues: items 1,474 tokens, answers 110
    "api-bank": {"generate.max_new_tokens": 1536},
}


def domain_default(key: str, domains: list[str]) -> int | None:
    """The largest default the run's domains give `key` ("generate.max_new_tokens"), or None."""
    values = [DOMAIN_DEFAULTS.get(d, {}).get(key) for d in domains]
    return max((v for v in values if v is not None), default=None)
