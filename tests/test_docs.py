"""Every Python block of the repository's Markdown runs in CI, or says why it does not.

The package READMEs and the backend author's guide are run by their own packages' tests
(listed in ``RUN_BY``); the root README and CONTRIBUTING.md are run here, where every
first-party package is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qcore.testing.readme import assert_readme_runs, python_blocks, unexplained_skips

ROOT = Path(__file__).parents[1]

#: Each Markdown file with Python blocks to run, and the test module that runs them.
RUN_BY = {
    "README.md": "tests/test_docs.py",
    "CONTRIBUTING.md": "tests/test_docs.py",
    "docs/huggingface.md": "tests/test_huggingface_guide.py",
    "docs/shipping.md": "tests_shipping/test_shipping_guide.py",
    "docs/tuning.md": "tests/test_tuning_guide.py",
    "docs/write-a-backend.md": "tests/test_write_a_backend_guide.py",
    "examples/qbackend-example/README.md": "examples/qbackend-example/tests/test_readme.py",
    "examples/qbackend-qnnpack/README.md": "examples/qbackend-qnnpack/tests/test_readme.py",
    "packages/qcore/README.md": "packages/qcore/tests/test_readme.py",
    "packages/qbackend-onednn/README.md": "packages/qbackend-onednn/tests/test_readme.py",
    "packages/qbackend-executorch/README.md": "packages/qbackend-executorch/tests/test_readme.py",
    "packages/qquantizer-xnnpack/README.md": "packages/qquantizer-xnnpack/tests/test_readme.py",
    "packages/qinductor-x86/README.md": "packages/qinductor-x86/tests/test_readme.py",
}
_NOT_DOCS = {".git", ".tox", "build", "dist", "node_modules", ".venv"}


def markdown_files() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.md")
        if not _NOT_DOCS.intersection(path.relative_to(ROOT).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    )


def test_every_python_block_runs_somewhere_or_says_why() -> None:
    problems = []
    for path in markdown_files():
        name = path.relative_to(ROOT).as_posix()
        problems += [
            f"{where}: marked not-run without a reason" for where in unexplained_skips(path)
        ]
        if python_blocks(path) and name not in RUN_BY:
            problems.append(f"{name}: has Python blocks that no test runs (add it to RUN_BY)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", sorted(RUN_BY))
def test_each_runner_exists_and_reads_its_document(doc: str) -> None:
    runner = ROOT / RUN_BY[doc]
    assert (ROOT / doc).is_file(), f"{doc} is listed but missing"
    assert runner.is_file(), f"{RUN_BY[doc]}, which should run {doc}, is missing"
    assert Path(doc).name in runner.read_text(encoding="utf-8"), f"{RUN_BY[doc]} never names {doc}"
    assert python_blocks(ROOT / doc), f"{doc} has no Python block to run: drop it from RUN_BY"


@pytest.mark.parametrize("doc", ["README.md", "CONTRIBUTING.md"])
def test_root_documents_run_as_written(doc: str) -> None:
    assert assert_readme_runs(ROOT / doc) >= 1
