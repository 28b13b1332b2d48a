"""The README's examples run, as a reader would paste them into a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from qcore.testing.readme import assert_readme_runs


def test_readme_examples_run() -> None:
    assert_readme_runs(Path(__file__).parents[1] / "README.md")


def _unary_row(readme: str) -> str:
    (cell,) = [line.split(" | ")[1] for line in readme.splitlines() if line.startswith("| unary post-ops |")]
    return cell


def test_the_readmes_post_op_list_is_the_tables() -> None:
    """Each row of ``postop_table.POST_OPS`` in its order, with the int8 kernels that fuse
    it (a row the lowering reaches through another row says so), and nothing else."""
    from qinductor_x86.postop_table import POST_OPS, PostOp

    def shown(row: PostOp) -> str:
        if row.fn is None:
            return f"{row.name} (through another row)"
        return f"{row.name} ({', '.join(sorted(row.kernels))})"

    listed = _unary_row((Path(__file__).parents[1] / "README.md").read_text())
    assert listed.split("; each with")[0] == "; ".join(shown(row) for row in POST_OPS)
