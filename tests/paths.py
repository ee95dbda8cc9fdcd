"""Where things are, for every test whatever its folder: the repository's root, src/, and the hand-written data in
tests/fixtures/. Tests name these instead of counting parents of their own file, so moving a test needs no edit."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SRC = ROOT / "src"
FIXTURES = TESTS / "fixtures"
