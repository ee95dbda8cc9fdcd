"""A test module may import another test module only from its own folder: pytest puts a test file's own folder on
the path, so an import across folders works only when the other folder happens to be collected first, and fails
when the file runs alone (as benchmarks/gpu runs tests/engines/test_on_gpu.py). What several folders share lives
in a helper module at tests/ (tiny, stagekit, score_epoch, reference_losses, ...)."""

from __future__ import annotations

import ast

from paths import ROOT

TESTS = ROOT / "tests"


def _imported_test_modules(path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):  # inside functions too
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return {n for n in names if n.startswith("test_")}


def test_test_modules_import_test_modules_only_from_their_own_folder():
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for path in sorted(TESTS.rglob("test_*.py")) if "fixtures" not in path.parts
             for name in sorted(_imported_test_modules(path)) if not (path.parent / f"{name}.py").exists()]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_import_across_folders(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("def f():\n    from test_elsewhere import x\n")
    assert _imported_test_modules(probe) == {"test_elsewhere"}
