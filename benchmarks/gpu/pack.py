"""Pack what the GPU check (benchmarks/gpu/check.py) needs and a bare GPU machine lacks, into `.whl/` (ignored by
git; the machine receives it beside the working tree).

    python -m benchmarks.gpu.pack [--out .whl] [--find-links DIR] [--tokenizer-from MODEL]

The GPU machine has Python 3.12 with torch (CUDA), transformers, accelerate, peft, pyarrow, safetensors, tokenizers,
numpy, rich, typer, pytest and matplotlib, no package index and no model hub. What it lacks travels here:

- polars, at the version installed here, with its compiled engine (polars 2 ships it as polars-runtime-32): wheels
  for CPython 3.12 on manylinux x86-64, fetched with `pip download --no-deps --only-binary=:all:` (`--find-links
  DIR` takes them from a folder instead of the index);
- genenv itself, as a wheel built from this checkout (`pip wheel --no-deps --no-build-isolation`);
- a chat tokenizer, `tokenizer.tar.gz` (the embedded SmolLM2 model's by default: its tokenizer and chat template,
  3.5 MB, gzipped; its class named PreTrainedTokenizerFast, which every transformers release reads). The embedded model's 93 MB wheel cannot travel, so the check builds randomly initialised models
  of real shapes around this tokenizer.

trl is not packed: genenv imports it nowhere (its GRPO and RWR losses run on transformers' Trainer), and the GPU
tests do not need it. Nor is gguf (only the embedded model's one-time conversion reads GGUF).

Everything a call carries, the working tree included, must stay under 64 MiB: the packer adds up the files git
would send (tracked, and untracked ones not ignored) and the pack, and fails naming the sizes when they are over.
It writes `MANIFEST.json` (each file's size and sha256, the versions) and prints the call that runs the check.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 64 * 2**20
PYTHON = "3.12"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def carried_packages() -> list[str]:
    """polars and what it needs at run time, pinned to the versions installed here."""
    polars = importlib.metadata.version("polars")
    pins = [f"polars=={polars}"]
    for req in importlib.metadata.requires("polars") or []:
        if "extra ==" not in req and req.replace(" ", "").startswith("polars-runtime"):
            pins.append(req.split(";")[0].replace(" ", ""))
    return pins


def download(pins: list[str], out: Path, find_links: str | None) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", PYTHON,
           "--implementation", "cp", "-d", str(out), "--quiet"]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    if find_links:
        cmd += ["--no-index", "--find-links", find_links]
    subprocess.run(cmd + pins, check=True)


def build_project_wheel(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:  # built from a copy: no build/ or egg-info left in the checkout
        src = Path(tmp) / "src-copy"
        shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, src / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w",
                        str(out), str(src)], check=True)


def pack_tokenizer(model: str, out: Path) -> Path:
    """The model's tokenizer files (a folder, or `embedded`) as tokenizer.tar.gz."""
    from genenv_cli.machinery.models import resolve

    folder = Path(resolve(model).path)
    names = [n for n in TOKENIZER_FILES if (folder / n).exists()]
    if "tokenizer.json" not in names:
        raise SystemExit(f"{folder}: no tokenizer.json; --tokenizer-from needs a model folder with a fast tokenizer")
    target = out / "tokenizer.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        for n in names:
            data = (folder / n).read_bytes()
            if n == "tokenizer_config.json":  # a class every transformers release knows, not this one's own name
                config = json.loads(data)
                config["tokenizer_class"] = "PreTrainedTokenizerFast"
                data = json.dumps(config, indent=2).encode()
            info = tarfile.TarInfo(f"tokenizer/{n}")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return target


def working_tree_bytes() -> int:
    """The files a call sends besides the pack: tracked ones, and untracked ones git does not ignore."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return sum((ROOT / p).stat().st_size for p in out.decode().split("\0") if p and (ROOT / p).is_file())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / ".whl"))
    ap.add_argument("--find-links", help="take the wheels from this folder instead of the package index")
    ap.add_argument("--tokenizer-from", default="embedded", help="a model folder, or `embedded` (default)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pins = carried_packages()
    download(pins, out, args.find_links)
    build_project_wheel(out)
    pack_tokenizer(args.tokenizer_from, out)
    files = sorted(p for p in out.iterdir() if p.is_file())
    packed = sum(p.stat().st_size for p in files)
    tree = working_tree_bytes()
    # the commit travels in the manifest: the device machine's copy of .git can name another one (there it named
    # the commit the session began at, not the working tree that was sent)
    from lab.record import git_commit
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=ROOT).stdout.strip() != ""
    manifest = {"date": time.strftime("%Y-%m-%d"), "commit": git_commit(ROOT), "uncommitted_changes": dirty,
                "python": PYTHON, "platforms": PLATFORMS, "pins": pins,
                "files": {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files},
                "pack_bytes": packed, "working_tree_bytes": tree, "limit_bytes": LIMIT}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    mib = 2**20
    print(f"packed {len(files)} files, {packed / mib:.1f} MiB, into {out}; the working tree adds {tree / mib:.1f} MiB "
          f"(limit {LIMIT / mib:.0f} MiB)")
    if packed + tree > LIMIT:
        raise SystemExit(f"the pack ({packed / mib:.1f} MiB) and the working tree ({tree / mib:.1f} MiB) are over "
                         f"{LIMIT / mib:.0f} MiB together: remove untracked files from the checkout, or pack less")
    print("install on the GPU machine (benchmarks/gpu/README.md has the whole call):\n  " + INSTALL)


INSTALL = ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "
           ".whl/*.whl && export PYTHONPATH=/tmp/site")


if __name__ == "__main__":
    main()
