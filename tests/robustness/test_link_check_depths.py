"""Every folder between the run's root and a file genenv writes is checked for links, at every depth, the trackers'
own folders included: a `trackers/tensorboard` link leading outside the run gets a warning and no write or delete
outside. And the one function that checks (`safefiles.refuse_links_below`) holds over generated trees of folders,
links and files: it refuses exactly the paths that pass through a link (or climb out with `..`), so a path it lets
through resolves inside the run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import refuse_links_below
from hostile import cli


@pytest.mark.parametrize("tracker_folder", ["tensorboard", "tensorboard-file-link"])
def test_a_linked_tracker_folder_gets_a_warning_and_nothing_outside_is_written_or_deleted(run, tmp_path,
                                                                                          tracker_folder):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    theirs = outside / "events.out.tfevents.12345.theirs"
    theirs.write_bytes(b"someone else's events")
    toml = run / "genenv.toml"
    toml.write_text(re.sub(r"(?m)^report_to = .*$", 'report_to = ["tensorboard"]', toml.read_text(), count=1))
    trackers = run / "trackers"
    trackers.mkdir(exist_ok=True)
    if tracker_folder == "tensorboard":
        (trackers / "tensorboard").symlink_to(outside)
    else:  # the folder is real, an event file in it is a link to a file outside
        (trackers / "tensorboard").mkdir()
        (trackers / "tensorboard" / "events.out.tfevents.e0001.1-generate-tasks").symlink_to(theirs)
    r = cli("score", "--epoch", "1", "--run", run, expect=0)
    # the link is named as a link, or the write it would lead outside the tracker's folder is refused
    assert ("symbolic link" in r.stderr or "would write outside" in r.stderr) and "warning" in r.stderr, r.stderr
    assert sorted(p.name for p in outside.iterdir()) == [theirs.name]
    assert theirs.read_bytes() == b"someone else's events"


# ---------------------------------------------------------------- the property test

NAMES = ("a", "b", "c")
# a tree: name -> "file" | ("link", "inside" | "outside") | a sub-tree
tree = st.recursive(st.sampled_from(["file", ("link", "inside"), ("link", "outside")]),
                    lambda sub: st.dictionaries(st.sampled_from(NAMES), sub, max_size=3), max_leaves=12)
paths = st.lists(st.sampled_from([*NAMES, "..", "new"]), min_size=1, max_size=5)


def _build(folder: Path, spec: dict, inside: Path, outside: Path) -> None:
    for name, node in spec.items():
        p = folder / name
        if node == "file":
            p.write_text("x")
        elif isinstance(node, tuple):
            p.symlink_to(inside if node[1] == "inside" else outside)
        else:
            p.mkdir()
            _build(p, node, inside, outside)


def _expected_refusal(root: Path, parts: list[str]) -> bool:
    """The specification, walked by hand: a `..` anywhere, or a link at any prefix of the path."""
    if ".." in parts:
        return True
    here = root
    for part in parts:
        here = here / part
        if os.path.islink(here):
            return True
    return False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.dictionaries(st.sampled_from(NAMES), tree, max_size=3), parts=paths)
def test_refuse_links_below_refuses_exactly_the_paths_through_a_link(tmp_path_factory, spec, parts):
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "run", base / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inner").mkdir()
    _build(root, spec if isinstance(spec, dict) else {}, root / "inner", outside)
    path = root.joinpath(*parts)
    refused = False
    try:
        refuse_links_below(root, path)
    except InputError:
        refused = True
    assert refused == _expected_refusal(root, parts)
    if not refused:  # a path let through never resolves outside the run
        real = os.path.realpath(path)
        assert real == str(root) or real.startswith(str(root) + os.sep)
    # the whole-tree check (for a library's own folder, W&B's) refuses exactly when a link somewhere leads outside
    from genenv_cli.core.safefiles import refuse_links_leaving

    leaving = any(os.path.islink(os.path.join(d, n)) and not os.path.realpath(os.path.join(d, n)).startswith(
        str(root) + os.sep) for d, ds, fs in os.walk(root) for n in ds + fs)
    try:
        refuse_links_leaving(root, root, "x")
    except InputError:
        assert leaving
    else:
        assert not leaving
