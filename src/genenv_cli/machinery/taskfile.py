"""Reading an epoch's tasks.jsonl with the schema and the domain's own check (rollout and score use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import Domain
from genenv_cli.rundir import unchanged
from genenv_cli.rundir.datafiles import iter_jsonl


def written_unchanged(path: Path, recorded: dict[str, Any] | None) -> bool:
    """True when `path` is exactly what generate-tasks recorded writing (`recorded`: the {path, fingerprint} of
    its manifest, `RunDir.recorded_output`), so the domain already checked every payload; editing the file by
    hand makes this False and the next read re-checks."""
    try:
        return recorded is not None and Path(recorded["path"]).name == path.name \
            and unchanged(path, recorded["fingerprint"])
    except (LookupError, TypeError, AttributeError, ValueError):  # a record of another shape: check the file
        return False


def load_tasks(path: Path, domains: Domain | dict[str, Domain],
               recorded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every task, validated; the first bad record raises InputError naming the file and the task. A file
    generate-tasks wrote and nobody changed since (`recorded`: what its manifest recorded for it) was checked
    when it was written, so only its JSON is read. `domains`: the run's domain, or its domains by name (a mixed
    run); each task is checked by its own."""
    if not isinstance(domains, dict):
        domains = {domains.name: domains}
    check = not written_unchanged(path, recorded)
    tasks = []
    seen: dict[str, int] = {}
    for n, rec in enumerate(iter_jsonl(path, "tasks", validate=check), 1):
        domain = domains.get(rec["domain"])
        if domain is None:
            said = (f"the run's domain is {next(iter(domains))!r}" if len(domains) == 1
                    else f"the run's domains are {', '.join(map(repr, domains))}")
            raise InputError(f"{path}, task {rec['task_id']} (record {n}): domain is {rec['domain']!r} but {said}.")
        problem = domain.check_payload(rec["payload"]) if check else None
        if problem:
            raise InputError(f"{path}, task {rec['task_id']} (record {n}): payload is not a valid {domain.name} "
                             f"task: {problem}.")
        if rec["task_id"] in seen:
            raise InputError(f"{path}: task_id {rec['task_id']} appears twice (records {seen[rec['task_id']]} and "
                             f"{n}); task ids must be unique.")
        seen[rec["task_id"]] = n
        tasks.append(rec)
    if not tasks:
        raise InputError(f"{path}: no tasks in the file; expected one JSON task per line as generate-tasks writes "
                         f"them. Rerun `genenv generate-tasks --epoch N --force`.")
    return tasks
