"""`genenv domains check NAME` and `genenv domains preview NAME`: a domain looked at before an epoch is spent on it.

`check` runs the domain contract (`domains/checks.py`, the clauses the project's own test runs on the built-in
domains) with the answers the domain declares, and prints one line per clause. `preview` renders, with no model
loaded, what the models would be shown and what the parsers would make of their text: the environment's prompt
for a seed (as at epoch 1, then as at a later epoch, with made-up statistics), the agent's prompt for the same
seed, the domain's verdict on an environment output (a file, or the seed as the domain writes it) and its score
for an answer (a file, or the seed's right answer).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.errors import ConfigError, GenenvError, InputError
from genenv_cli.core.plugin_guard import GuardedDomain, PluginError, guard, isolated
from genenv_cli.domains.base import Domain, Reject

MARKS = {"ok": "ok  ", "fail": "FAIL", "skip": "skip"}
PROTOCOL = (Reject, NotImplementedError)  # what a domain's methods raise by design: passed on, never its bug


def domain_source(name: str, dom: Domain) -> str:
    from genenv_cli.catalogue.domains import DOMAINS

    module = sys.modules[type(dom).__module__]
    where = getattr(module, "__file__", None) or module.__name__
    origin = DOMAINS.origin(name)
    kind = (f"plugin (entry point `{name}` in {DOMAINS.group})" if origin == "plugin"
            else "registered at run time" if origin == "added" else origin)
    return f"{kind}: {type(dom).__name__} from {where}"


def check(name: str, run_root: Path | None, *, as_json: bool) -> int:
    """Print the contract's result for the domain; the exit status: 0 when no clause failed, else 1. The domain's
    code runs under the guard (`plugin_guard`): in a child process, each call with the stages' per-item limit."""
    limit = _limit(run_root)
    code, at, how = isolated(lambda: _check(name, run_root, as_json=as_json, limit=limit), limit)
    if code is not None:
        return code
    detail = f"{at} {how}" if at else f"{_owner(name)} {how}"
    if as_json:
        print(json.dumps({"domain": name, "ok": False, "checks": [{"name": "guard", "status": "fail",
                                                                    "detail": detail}]}, indent=2))
    else:
        print(f"genenv domains check {name}")
        print(f"  {MARKS['fail']} {detail}")
        print(f"{name}: failed — the domain's code ended or stalled the check (docs/domains.md, \"Writing a domain\")")
    return 1


def _check(name: str, run_root: Path | None, *, as_json: bool, limit: float) -> int:
    from genenv_cli.domains.checks import CheckResult, run_contract

    owner = _owner(name)
    try:
        dom = guard(owner, "loading (import and construction)", lambda: _domain(name, run_root), limit,
                    passes=(GenenvError,))
    except PluginError as exc:
        dom, results = None, [CheckResult("load", "fail", str(exc))]
    else:
        results = run_contract(GuardedDomain(dom, owner, limit, PROTOCOL))
    source = domain_source(name, dom) if dom is not None else owner
    failed = [r for r in results if r.status == "fail"]
    if as_json:
        print(json.dumps({"domain": name, "source": source, "ok": not failed,
                          "checks": [{"name": r.name, "status": r.status, "detail": r.detail} for r in results]},
                         indent=2))
        return 1 if failed else 0
    print(f"genenv domains check {name}  ({source})")
    for r in results:
        print(f"  {MARKS[r.status]} {r.name}: {r.detail}")
    skipped = sum(r.status == "skip" for r in results)
    print(f"{name}: {len(results) - len(failed) - skipped} passed, {len(failed)} failed, {skipped} skipped"
          + (" — fix the failed clauses before a run (docs/domains.md, \"Writing a domain\")" if failed else ""))
    return 1 if failed else 0


def listing() -> int:
    """`genenv domains`: every registered domain with its description. Each is loaded under the guard, so one
    that fails to import, raises, exits or hangs is listed as broken (with why) and the others are still listed;
    the exit status is 1 when one is broken."""
    from genenv_cli.catalogue.domains import DOMAINS

    names = DOMAINS.names()
    owners = {_owner(n): n for n in names}
    broken = 0
    while names:
        todo = list(names)
        code, at, how = isolated(lambda todo=todo: _list(todo, ITEM_TIMEOUT_S), ITEM_TIMEOUT_S)
        if code is not None:
            return 1 if code or broken else 0
        name = owners.get((at or "").split(": ", 1)[0], todo[0])
        print(f"{name:12s} BROKEN: {at or _owner(name)} {how}")
        broken += 1
        names = todo[todo.index(name) + 1:]
    return 1 if broken else 0


def _list(names: list[str], limit: float) -> int:
    from genenv_cli.catalogue.domains import get_domain

    broken = 0
    for name in names:
        owner = _owner(name)
        try:
            dom = guard(owner, "loading (import and construction)", lambda n=name: get_domain(n), limit)
            text = guard(owner, "description", lambda d=dom: str(d.description), limit)
        except PluginError as exc:
            print(f"{name:12s} BROKEN: {exc}")
            broken += 1
        else:
            print(f"{name:12s} {text}")
    return 1 if broken else 0


def _owner(name: str) -> str:
    """How a domain's own failure is attributed: a plugin by its entry point, a built-in domain by its name."""
    from genenv_cli.catalogue.domains import DOMAINS

    return f"domain `{name}`" if name in DOMAINS.rows else f"plugin `{name}` (entry point in {DOMAINS.group})"


def _limit(run_root: Path | None) -> float:
    """The per-item limit the stages use: the run's score.item_timeout_s, else its default."""
    if run_root is None:
        return ITEM_TIMEOUT_S
    from genenv_cli.rundir import find_run

    try:
        return float(find_run(run_root).load_config().score.item_timeout_s)
    except GenenvError:
        return ITEM_TIMEOUT_S


def _domain(name: str, run_root: Path | None) -> Domain:
    """The registered domain; with a run, with the run's imported seeds (`genenv init --seeds`)."""
    from genenv_cli.catalogue.domains import get_domain

    dom = get_domain(name)
    if run_root is None:
        return dom
    from genenv_cli.domains.seedfiles import domains_for_run
    from genenv_cli.rundir import find_run

    run = find_run(run_root)
    domains = domains_for_run(run.load_config(), run.root)
    if name not in domains:
        raise ConfigError(f"{run.root}: domain {name} is not one of the run's ({', '.join(domains)}).")
    return domains[name]


def _read_text(path: Path | None, what: str) -> str | None:
    if path is None:
        return None
    if str(path) == "-":
        return sys.stdin.read()
    if not path.is_file():
        why = "is not a file" if path.exists() else "no such file"
        raise InputError(f"{path}: {why}; {what} expects a text file holding the model's text (or - for standard "
                         f"input).")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         f"{what} expects the model's text.") from None


def preview(name: str, run_root: Path | None, *, seed_id: str | None, output: Path | None, answer: Path | None,
            as_json: bool, says: list[str] | None = None, answers: Path | None = None, model: str | None = None,
            max_new_tokens: int = 256) -> int:
    """Print the preview; 0 when the environment output parses and the answer scores 1 (for a multi-turn domain:
    the episode it plays earns 1; the defaults do, for a domain that keeps its contract), else 1, so a script can
    ask "would this be accepted?". The domain's code runs under the guard (`plugin_guard`); its failure is a
    PluginError naming it, the method and the message. `says`, `answers` (a file) or `model` play the episode
    (views/preview_episode.py)."""
    from genenv_cli.views.preview_episode import scripted_answers

    env_text = _read_text(output, "--output")
    answer_text = _read_text(answer, "--answer")
    script = scripted_answers(says, answers, _read_text(answers, "--answers"))
    if script is not None and model is not None:
        raise InputError("--model plays the episode itself; give it without --say or --answers.")
    limit = _limit(run_root)
    play = {"script": script, "model": model, "max_new_tokens": max_new_tokens,
            "asked": script is not None or model is not None}
    code, at, how = isolated(lambda: _preview(name, run_root, seed_id, (output, env_text), (answer, answer_text),
                                              as_json, limit, play), limit)
    if code is None:
        raise PluginError(f"{at} {how}" if at else f"{_owner(name)} {how}")
    return code


def _preview(name: str, run_root: Path | None, seed_id: str | None, output: tuple[Path | None, str | None],
             answer: tuple[Path | None, str | None], as_json: bool, limit: float,
             play: dict[str, Any] | None = None) -> int:
    from genenv_cli.domains.checks import all_seeds, is_chat
    from genenv_cli.domains.fingerprints import fixed_contexts

    owner = _owner(name)
    dom = GuardedDomain(guard(owner, "loading (import and construction)", lambda: _domain(name, run_root), limit,
                              passes=(GenenvError,)), owner, limit, PROTOCOL)
    seeds = all_seeds(dom)
    if not seeds:
        raise InputError(f"domain {name} has no seeds to preview with.")
    seed = next((s for s in seeds if s.id == seed_id), None) if seed_id else dom.seeds("train")[0]
    if seed is None:
        raise InputError(f"--seed {seed_id!r}: no such seed of {name} (first ones: "
                         f"{', '.join(s.id for s in seeds[:5])}).")
    contexts = [c for c in fixed_contexts(dom)[:2]]
    contexts = [type(c)(seed.id, seed.shape, seed.payload, c.parent_p, c.stats, c.frontier) for c in contexts]
    env_text = output[1]
    env_from = str(output[0]) if env_text is not None else "the seed, as the domain writes it (render_task)"
    if env_text is None:
        env_text = _declared(lambda: dom.render_task(seed.payload))
    answer_text = answer[1]
    answer_from = str(answer[0]) if answer_text is not None else "the seed's right answer (gold_answer)"
    if answer_text is None:
        answer_text = _declared(lambda: dom.gold_answer(seed.payload))
    verdict = _parse(dom, env_text, contexts[0])
    scored = _score(dom, seed.payload, answer_text)
    env_prompts = [{"epoch": "first" if c.stats is None else "later", "parent_p": c.parent_p,
                    "messages": _chat(dom.env_messages(c), owner, "env_messages()", is_chat)} for c in contexts]
    result = {
        "domain": name, "seed": {"id": seed.id, "split": seed.split, "shape": seed.shape, "payload": seed.payload},
        "env_prompts": env_prompts,
        "agent_prompt": _chat(dom.agent_messages(seed.payload), owner, "agent_messages()", is_chat),
        "env_output": {"from": env_from, "text": env_text, **verdict},
        "answer": {"from": answer_from, "text": answer_text, **scored},
    }
    if (play or {}).get("asked") and not dom.episodic:
        raise InputError(f"domain {name} is single-turn (max_turns = 1): there is no episode to play; score an "
                         f"answer with --answer FILE.")
    if not as_json:
        print(_render(result))
    right = scored.get("reward") == 1.0
    if dom.episodic:
        from genenv_cli.views.preview_episode import episode_part

        result["episode"] = episode_part(dom, owner, limit, seed.payload, play or {}, None if as_json else print)
        right = result["episode"].get("reward") == 1.0
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    return 0 if verdict.get("accepted") and right else 1


def _chat(messages: Any, owner: str, function: str, is_chat: Any) -> Any:
    if not is_chat(messages):
        raise PluginError(f"{owner}: {function} returned {_shown(messages)}, not chat messages (a non-empty list of "
                          f"{{role, content}} with string contents, not ending with the assistant's turn)")
    return messages


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _declared(call: Any) -> str | None:
    try:
        return call()
    except NotImplementedError:
        return None


def _parse(dom: Domain, text: str | None, ctx: Any) -> dict[str, Any]:
    if text is None:
        return {"accepted": None, "reason": "no output given (--output FILE) and the domain declares no render_task"}
    try:
        got = dom.parse_env_output(text, ctx)
    except Reject as exc:
        return {"accepted": False, "reason": str(exc)}
    if not (isinstance(got, tuple) and len(got) == 2):
        raise PluginError(f"{dom.owner}: parse_env_output() returned {_shown(got)}, not (payload, shape)")
    payload, shape = got
    problem = dom.check_payload(payload)
    if problem:
        return {"accepted": False, "reason": f"invalid: {problem} (check_payload refuses what the parser gave)"}
    return {"accepted": True, "shape": shape, "payload": payload}


def _score(dom: Domain, payload: dict[str, Any], text: str | None) -> dict[str, Any]:
    if text is None:
        return {"reward": None, "reason": "no answer given (--answer FILE) and the domain declares none for it"}
    s = dom.score(payload, text)
    if not all(isinstance(getattr(s, k, None), int | float) for k in ("reward", "partial")):
        raise PluginError(f"{dom.owner}: score() returned {_shown(s)}, not a Score (reward, partial, valid, error)")
    return {"reward": s.reward, "partial": s.partial, "valid": s.valid, "reason": s.error}


def _messages(messages: list[dict[str, str]]) -> list[str]:
    out = []
    for m in messages:
        out.append(f"  [{m['role']}]")
        out += [f"    {line}" for line in str(m["content"]).splitlines() or [""]]
    return out


def _render(r: dict[str, Any]) -> str:
    s = r["seed"]
    lines = [f"genenv domains preview {r['domain']}  (seed {s['id']}, {s['split']}, shape {s['shape']}; no model "
             f"loaded)", ""]
    for p in r["env_prompts"]:
        when = ("epoch 1: no statistics yet" if p["epoch"] == "first" else
                f"a later epoch: made-up statistics, the example solved {p['parent_p']:.0%} of the time")
        lines += [f"The environment's prompt ({when}):", *_messages(p["messages"]), ""]
    lines += ["The agent's prompt:", *_messages(r["agent_prompt"]), ""]
    e = r["env_output"]
    lines += [f"The environment's output ({e['from']}):"]
    lines += [f"    {line}" for line in (e["text"] or "").splitlines()] if e["text"] is not None else []
    if e["accepted"]:
        lines.append(f"  -> accepted: a task of shape {e['shape']}: {json.dumps(e['payload'], ensure_ascii=False)}")
    else:
        lines.append(f"  -> {'rejected' if e['accepted'] is False else 'not checked'}: {e['reason']}")
    a = r["answer"]
    lines += ["", f"An answer ({a['from']}):"]
    lines += [f"    {line}" for line in (a["text"] or "").splitlines()] if a["text"] is not None else []
    if a["reward"] is None:
        lines.append(f"  -> not scored: {a['reason']}")
    else:
        lines.append(f"  -> reward {a['reward']:g} (partial {a['partial']:g}, "
                     f"{'valid' if a['valid'] else 'invalid'})" + (f": {a['reason']}" if a["reason"] else ""))
    return "\n".join(lines)
