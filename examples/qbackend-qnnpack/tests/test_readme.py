"""The README's examples run, as a reader would paste them into a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from qcore.testing.readme import assert_readme_runs


def test_readme_examples_run() -> None:
    assert_readme_runs(Path(__file__).parents[1] / "README.md")
