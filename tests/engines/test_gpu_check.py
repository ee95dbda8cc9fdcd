"""The prepared GPU check, as far as a CPU can take it: the packing (offline, stand-in polars wheels), the packed
genenv installing the way the GPU machine installs it, and a dry run of every part of the check at toy sizes."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from paths import ROOT

# `heavy`: a minute or more on its own; `nox -s heavy` runs it (CI too), `nox -s tests` leaves it out
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def _stand_in_wheel(folder: Path, filename: str, name: str, version: str) -> None:
    """A wheel with nothing in it but its metadata: what pip needs to download and install it."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(folder / filename, "w") as z:
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")


@pytest.fixture(scope="module")
def pack(tmp_path_factory, tiny_model) -> Path:
    links = tmp_path_factory.mktemp("links")
    version = importlib.metadata.version("polars")
    _stand_in_wheel(links, f"polars-{version}-py3-none-any.whl", "polars", version)
    _stand_in_wheel(links, f"polars_runtime_32-{version}-cp311-abi3-manylinux_2_17_x86_64.whl", "polars-runtime-32",
                    version)
    out = tmp_path_factory.mktemp("pack") / ".whl"
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.pack", "--out", str(out), "--find-links", str(links),
                           "--tokenizer-from", str(tiny_model)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the working tree adds" in done.stdout and "--target /tmp/site" in done.stdout
    return out


def test_the_pack_holds_polars_genenv_and_a_chat_tokenizer_under_the_limit(pack):
    manifest = json.loads((pack / "MANIFEST.json").read_text())
    version = importlib.metadata.version("polars")
    assert manifest["pins"] == [f"polars=={version}", f"polars-runtime-32=={version}"]
    names = sorted(manifest["files"])
    assert [n.split("-")[0] for n in names] == ["genenv_cli", "polars", "polars_runtime_32", "tokenizer.tar.gz"]
    for name, entry in manifest["files"].items():
        data = (pack / name).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["pack_bytes"] + manifest["working_tree_bytes"] <= manifest["limit_bytes"] == 64 * 2**20
    with tarfile.open(pack / "tokenizer.tar.gz") as tar:
        files = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert "tokenizer.json" in files
    assert json.loads(files["tokenizer_config.json"])["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_the_packed_genenv_installs_as_the_gpu_machine_installs_it(pack, tmp_path):
    site = tmp_path / "site"
    wheels = sorted(str(p) for p in pack.glob("*.whl"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--upgrade", "--target", str(site), *wheels], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code = ("import genenv_cli, genenv_cli.domains.arith as a, importlib.metadata as m; "
            "print(genenv_cli.__file__); print(len(a.ArithDomain().seeds('train'))); print(m.version('genenv-cli'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(site)), timeout=120)
    assert out.returncode == 0, out.stderr
    where, seeds, version = out.stdout.split()
    assert where.startswith(str(site)) and int(seeds) > 0 and version   # the package data travelled too


def test_a_dry_run_of_the_check_runs_every_part(pack, tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.check", "--dry-run", "--pack", str(pack),
                           "--budget-s", "2400", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=2500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    record = json.loads((tmp_path / "gpu_check-cpu-dry-run.json").read_text())
    assert record["dry_run"] and record["device"] == "cpu" and record["pack"]["pins"]
    parts = record["parts"]
    assert {k: v["status"] for k, v in parts.items()} == dict.fromkeys(
        ["models", "updates", "big", "rollout_speed", "shard_agreement", "gpu_tests", "epoch", "mismatch"], "ok")
    assert parts["gpu_tests"].get("skipped", 0) >= 4                      # no CUDA here
    runs = parts["updates"]["runs"]
    assert set(runs) == {"update-agent LoRA", "update-env FSDP"}
    big = parts["big"]["runs"]
    assert set(big) == {"7B update-env LoRA", "7B update-agent LoRA, no expandable segments"}
    for r in [*runs.values(), *big.values()]:
        assert r["exit"] == 0 and r["predicted_gpu_gb"] > 0 and r["host_anon_peak_gb"] > 0
        assert r["loss_inputs"]["route"] == "head" and r["loss_inputs"]["output_dtype"] == "float32"  # CPU: float32
        assert r["plan_gb"]["total"] == r["predicted_gpu_gb"]
    assert runs["update-env FSDP"]["method"] == "fsdp"
    assert big["7B update-env LoRA"]["alloc_conf"] == "expandable_segments:True"              # genenv's default
    assert big["7B update-agent LoRA, no expandable segments"]["alloc_conf"] == "expandable_segments:False"  # the user's
    assert big["7B update-agent LoRA, no expandable segments"]["allocator"] == "plain"
    shards = parts["shard_agreement"]
    assert shards["samples"] == 6 and shards["tokens"] > 0
    assert shards["token_agreement"] == 1.0 and shards["samples_identical"] == 6   # CPU, float32: the same tokens
    assert set(parts["epoch"]["stages"]) == {"generate-tasks", "rollout", "score", "update-agent", "update-env"}
    assert parts["mismatch"]["samples"] > 0 and parts["mismatch"]["mean_abs_delta_logprob"] < 1e-3   # fp32 both
    assert parts["rollout_speed"]["tokens"]["genenv"] > 0
    table = done.stdout[done.stdout.index("GPU check on cpu"):]
    for row in ("models", "update-agent LoRA", "update-env FSDP", "7B update-env LoRA", "rollout_speed",
                "shard_agreement", "gpu_tests", "epoch", "mismatch"):
        assert f"\n{row} " in table
