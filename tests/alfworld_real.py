"""ALFWorld's real games for the tests that play them: the archives in ../shared/data/alfworld (relative to the
repository root; a user's clone has none) unpacked once per test session, and alfworld 0.4.2 (the `alfworld`
extra; `nox -s alfworld` installs it). Tests that need either skip, saying which is missing.

Fixtures (registered in conftest.py): `alfworld_valid`, the folder holding json_2.1.1/valid_seen and valid_unseen
(the 274 evaluation games); `alfworld_train_sample`, a folder holding json_2.1.1/train with TRAIN_SAMPLE's games
only (the training archive holds 3,553)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from paths import ROOT

SHARED = ROOT.parent / "shared" / "data" / "alfworld"
VALID_ARCHIVE = SHARED / "json_2.1.1-valid.tar.xz"
TRAIN_ARCHIVE = SHARED / "json_2.1.1-train.tar.xz"
# one training game per task type, the first of each type's folders in sorted order: a fixed sample
TRAIN_TYPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep",
               "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep", "pick_two_obj_and_place")


def need_alfworld() -> None:
    pytest.importorskip("textworld", reason="alfworld is not installed (pip install 'genenv-cli[alfworld]'; "
                                            "`nox -s alfworld` installs it)")
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'genenv-cli[alfworld]')")


def need_archive(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent: the real ALFWorld games are only in the project's shared data "
                    f"(../shared/data from the repository root)")
    return path


def _unpack(archive: Path, dest: Path, keep=lambda name: True) -> None:
    with tarfile.open(archive) as tar:
        members = [m for m in tar if m.isfile() and keep(m.name)]
        tar.extractall(dest, members=members, filter="data")


@pytest.fixture(scope="session")
def alfworld_valid(tmp_path_factory) -> Path:
    """The folder holding json_2.1.1/valid_seen and json_2.1.1/valid_unseen (unpacked once)."""
    archive = need_archive(VALID_ARCHIVE)
    dest = tmp_path_factory.mktemp("alfworld-valid")
    _unpack(archive, dest)
    return dest


@pytest.fixture(scope="session")
def alfworld_train_sample(tmp_path_factory) -> Path:
    """The folder holding json_2.1.1/train with one game per task type (see TRAIN_TYPES)."""
    archive = need_archive(TRAIN_ARCHIVE)
    with tarfile.open(archive) as tar:
        games = sorted(m.name for m in tar if m.name.endswith("/game.tw-pddl"))
    chosen = {next(g for g in games if g.split("/")[2].startswith(t + "-")) for t in TRAIN_TYPES}
    dest = tmp_path_factory.mktemp("alfworld-train")
    _unpack(archive, dest, lambda name: name in chosen)
    return dest
