"""The README's first minute cannot break unseen: CI runs the README's two quickstart commands, in order; the demo
they start writes only where genenv lets it write, and every path the README promises is one the demo writes; and
every `genenv ...` command line in the README and the docs names a command and options that exist."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
import types
from pathlib import Path

import pytest

from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import refuse_overlap
from paths import ROOT

README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("benchmarks/*/README.md")),
         ROOT / "experiments" / "README.md", *sorted((ROOT / "src").rglob("README.md"))]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def quickstart_commands(text: str) -> list[str]:
    """The shell commands of the README's first fenced block under "Quickstart", comments removed."""
    block = re.search(r"```bash\n(.*?)```", _section(text, "Quickstart"), re.S)
    assert block, "the README's Quickstart has no ```bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.split("#")[0].strip()]


def ci_commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#") and not line.startswith(("set ", "cd "))]


def test_ci_runs_the_readmes_two_commands_demo_first():
    readme = quickstart_commands(README.read_text())
    assert len(readme) == 2 and "-s demo" in readme[0] and "-s tests" in readme[1], readme
    assert ci_commands(CI.read_text()) == readme


def test_the_check_sees_a_ci_that_drops_the_demo():
    readme = quickstart_commands(README.read_text())
    assert ci_commands("set -e\n" + readme[1] + "\n") != readme


class _Session:
    """What noxfile's sessions call, recorded instead of run."""

    def __init__(self, tmp: Path):
        self.posargs: list[str] = []
        self.runs: list[tuple[str, ...]] = []
        self.logs: list[str] = []
        self._tmp = tmp

    def install(self, *args, **kw):
        pass

    def run(self, *args, **kw):
        self.runs.append(tuple(str(a) for a in args))

    def log(self, message, *args):
        self.logs.append(str(message))

    def create_tmp(self) -> str:
        return str(self._tmp)


def _noxfile(monkeypatch) -> types.ModuleType:
    fake = types.ModuleType("nox")
    fake.options = types.SimpleNamespace()
    fake.Session = _Session

    def session(func=None, **kw):
        return func if func is not None else (lambda f: f)

    fake.session = session
    monkeypatch.setitem(sys.modules, "nox", fake)
    spec = importlib.util.spec_from_file_location("genenv_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _option(run: tuple[str, ...], name: str) -> str | None:
    return run[run.index(name) + 1] if name in run else None


def test_the_demo_writes_only_where_genenv_lets_it(monkeypatch, tmp_path):
    session = _Session(tmp_path)
    _noxfile(monkeypatch).demo(session)
    genenv = [r for r in session.runs if r[0] == "genenv"]
    run = _option(genenv[0], "init") or genenv[0][2]
    assert genenv[0][1] == "init" and run == "demo-run"
    outs = [(r[1], _option(r, "--out")) for r in genenv if _option(r, "--out")]
    assert ("export", "demo-run-agent") in outs
    for command, out in outs:
        # genenv's own rule: an --out that is the run, inside it or contains it is refused
        refuse_overlap(tmp_path / out, tmp_path / run, "--out", command)


def test_the_rule_refuses_the_old_demo_export(tmp_path):
    with pytest.raises(InputError, match="inside the run"):
        refuse_overlap(tmp_path / "demo-run/export/agent", tmp_path / "demo-run", "--out", "export")


def test_every_path_the_readme_promises_is_one_the_demo_writes(monkeypatch, tmp_path):
    session = _Session(tmp_path)
    _noxfile(monkeypatch).demo(session)
    export = next(_option(r, "--out") for r in session.runs if r[:2] == ("genenv", "export"))
    quick = _section(README.read_text(), "Quickstart")
    promised = set(re.findall(r"(?<![\w/.-])(demo-run[\w./-]*)", quick))
    assert promised, "the Quickstart names no path of the demo"
    # inside the run the demo writes the report (report's default folder) and the trackers' files
    # (run.report_to); outside it, only the export
    inside = ("demo-run/report/", "demo-run/trackers/")
    for path in promised:
        clean = path.rstrip("./")
        assert clean == "demo-run" or clean.startswith(inside) or clean == export, path
    assert any(p.rstrip("/.") == export for p in promised), "the Quickstart does not say where the export goes"


# ---- every `genenv ...` in the README and the docs exists -------------------------------------------------------

# a command line: `genenv` first, after environment assignments (`WANDB_MODE=offline genenv run ...`)
CALL = re.compile(r"^\s*\(?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*genenv((?:\s+[^\s|;&#`]+)+)")


def _code(text: str) -> list[tuple[int, str]]:
    """(line, code) for each fenced block's lines (continuations joined) and each inline code span."""
    out, fenced, pending = [], False, ""
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            joined = pending + line
            if joined.rstrip().endswith("\\"):
                pending = joined.rstrip()[:-1] + " "
                continue
            pending = ""
            out.append((n, joined.split(" # ")[0]))
        else:
            out += [(n, span) for span in re.findall(r"`([^`]+)`", line)]
    return out


def _calls(code: str) -> list[list[str]]:
    calls = []
    for segment in re.split(r"&&|\|\||;|\|", code):
        m = CALL.search(segment)
        if not m:
            continue
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            words = m.group(1).split()
        calls.append(words)
    return calls


def _problems(words: list[str]) -> list[str]:
    import typer.main

    from genenv_cli.cli import app

    command = typer.main.get_command(app)
    path = ["genenv"]
    top = {"--help", *(o for param in command.params for o in getattr(param, "opts", ()))}
    while words and words[0] in top and words[0] not in ("--help", "--version"):
        words = words[1:]  # a global switch before the command (`genenv --verbose score`)
    while words and hasattr(command, "commands") and words[0] in command.commands:
        path.append(words[0])
        command = command.commands[words[0]]
        words = words[1:]
    if words and (words[0].startswith("<") or words[0].isupper()):
        return []  # a placeholder (`genenv <stage> --epoch E`, `genenv COMMAND`)
    if len(path) == 1:
        if not words or words[0] in top:
            return []
        return [f"genenv has no command {words[0]!r}"]
    if hasattr(command, "commands") and words and not words[0].startswith("-"):
        return [f"`{' '.join(path)}` has no command {words[0]!r}"]
    known = {"--help"}
    for param in command.params:
        known.update(getattr(param, "opts", ()))
        known.update(getattr(param, "secondary_opts", ()))
    bad = []
    for word in words:
        if word == "--":
            break
        if word.startswith("--") and word.split("=")[0] not in known and word != "...":
            bad.append(f"`{' '.join(path)}` has no option {word.split('=')[0]}")
    return bad


def doc_command_problems(text: str) -> list[str]:
    found = []
    for n, code in _code(text):
        for words in _calls(code):
            found += [f"line {n}: {p}" for p in _problems(words)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_genenv_command_in_the_docs_exists(page):
    assert doc_command_problems(page.read_text()) == []


@pytest.mark.parametrize("text", [
    "```bash\ngenenv rollouts --epoch 1\n```",
    "run `genenv score --epochs 2` to score",
    "```bash\ngenenv init runs/x --domain arith && genenv run --epoch-count 2\n```",
    "```bash\ngenenv evaluate --bench bfcl \\\n  --no-such-flag\n```",
    "`genenv domains lists`",
])
def test_the_command_check_catches_what_does_not_exist(text):
    assert doc_command_problems(text), text


@pytest.mark.parametrize("text", [
    "```bash\ngenenv run --epochs 3 --run runs/a   # every stage\n```",
    "`genenv domains check unitconv` and `genenv --help`",
    "the `genenv.toml` file, `pip install 'genenv-cli[tensorboard]'`",
    "```bash\nWANDB_MODE=offline genenv run --epochs 3\n```",
    "`genenv <stage> --epoch E --run DIR`", "python -m experiments.curriculum --arms genenv --seeds 1",
])
def test_the_command_check_accepts_what_exists(text):
    assert doc_command_problems(text) == [], text


def test_the_check_reads_the_readmes_commands():
    calls = [w for _, code in _code(README.read_text()) for w in _calls(code)]
    assert len(calls) >= 10 and ["run", "--epochs", "3", "--run", "runs/arith"] in calls
