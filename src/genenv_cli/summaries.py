"""Each stage's one-line summary (for people) and its fields (for --json), from the stage's manifest."""

from __future__ import annotations

from typing import Any

from genenv_cli.contract import StageResult


def summarize(result: StageResult) -> tuple[dict[str, Any], str]:
    """(fields for --json, one line for people): the line is the stage's own `summary` of its manifest."""
    from genenv_cli.stages import stage_module

    m = result.manifest or {}
    counts, metrics = m.get("counts", {}), m.get("metrics", {})
    fields = {"skipped": result.skipped, "seconds": m.get("seconds"), **counts, **metrics,
              "outputs": [o["path"] for o in m.get("outputs", {}).values()]}
    if result.skipped:
        return fields, result.message
    module = stage_module(result.stage)
    said = module.summary(counts, metrics) if hasattr(module, "summary") else "done"
    text = f"{result.stage} epoch {result.epoch}: {said} in {m.get('seconds', 0):.1f}s"
    outs = ", ".join(fields["outputs"][:4])
    return fields, text + (f"; wrote {outs}" if outs else "")
