"""The `.[vllm]` dependency set: our pins against the declared requirements of the vLLM releases we support (the
floor and the newest, recorded in fixtures/vllm_requires.json; `nox -s vllm-resolve` checks the whole graph
against the package index)."""

import json
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from paths import FIXTURES, ROOT

VLLM = json.loads((FIXTURES / "vllm_requires.json").read_text())["versions"]
# where vLLM runs: Linux with a CUDA GPU, CPython 3.12
GPU_MACHINE = {"python_version": "3.12", "python_full_version": "3.12.3", "platform_machine": "x86_64",
               "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix", "extra": ""}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _ours() -> dict[str, SpecifierSet]:
    return {canonicalize_name(r.name): r.specifier for r in map(Requirement, _project()["dependencies"])}


def _witness(a: SpecifierSet, b: SpecifierSet) -> Version | None:
    """A version both admit, tried among the versions either names (and just above them): enough for the
    ==, >=, <, != and .* clauses packages write."""
    candidates = {Version("0"), Version("9999")}
    for spec in (*a, *b):
        base = Version(spec.version.removesuffix(".*"))
        r = base.release + (0,) * (3 - len(base.release))
        candidates |= {base, Version(f"{r[0]}.{r[1]}.{r[2] + 1}"), Version(f"{r[0]}.{r[1] + 1}.0"), Version(f"{r[0] + 1}.0.0")}
    return next((v for v in sorted(candidates) if v in a and v in b), None)


def test_the_vllm_floor_is_the_first_release_with_processed_logprobs():
    extra = [Requirement(r) for r in _project()["optional-dependencies"]["vllm"]]
    assert [r.name for r in extra] == ["vllm"]
    spec = extra[0].specifier
    assert "0.10.2" in spec and "0.10.1.1" not in spec and "0.10.0" not in spec
    assert "0.10.2" in VLLM                                    # the recorded requirements include the floor


def test_witness_finds_what_both_admit():
    assert _witness(SpecifierSet(">=4.56"), SpecifierSet(">=5.16.1,<5.21.0")) == Version("5.16.1")
    assert _witness(SpecifierSet(">=2.4"), SpecifierSet("==2.8.0")) == Version("2.8.0")
    assert _witness(SpecifierSet(">=4.56"), SpecifierSet("!=5.0.*,>=4.56.0")) == Version("4.56")
    assert _witness(SpecifierSet(">=5"), SpecifierSet("<4.99")) is None


@pytest.mark.parametrize("version", sorted(VLLM))
def test_our_pins_admit_what_vllm_requires(version):
    meta = VLLM[version]
    ours = _ours()
    shared = {}
    for text in meta["requires_dist"]:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(GPU_MACHINE):
            continue                                           # another platform, or one of vLLM's own extras
        name = canonicalize_name(req.name)
        if name in ours:
            shared[name] = req.specifier
            assert _witness(ours[name], req.specifier) is not None, \
                f"vllm {version} requires {req}, which our `{name}{ours[name]}` excludes"
    assert {"torch", "transformers"} <= set(shared)           # the check is about something
    py = SpecifierSet(_project()["requires-python"])
    assert _witness(py, SpecifierSet(meta["requires_python"] or "")) is not None
