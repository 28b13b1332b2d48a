"""Run the Python examples of a README, so that documentation cannot drift from the code.

Every fenced block whose info string starts with ``python`` runs, in order, in one
namespace (a later block may use names an earlier one defined), in a fresh interpreter,
as a reader pasting them into a new session would. A block is skipped only when the line
before its fence says why: ``<!-- not-run: needs a model the reader brings -->``. A marker
without a reason fails the run, so every skipped example says why it is not checked.

A plugin's test suite can check its own README the same way::

    from qcore.testing.readme import assert_readme_runs

    def test_readme_examples_run() -> None:
        assert_readme_runs(Path(__file__).parents[1] / "README.md")

``python -m qcore.testing.readme README.md`` runs the blocks in this interpreter;
tracebacks point at the README's own line numbers.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The line before a fence that keeps a Python block from running, with the reason.
NOT_RUN_MARKER = "<!-- not-run: why -->"
_MARKED = re.compile(r"^<!--\s*not-run\b")
_REASON = re.compile(r"^<!--\s*not-run\s*:\s*(?P<reason>\S.*?)\s*-->$")

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a Markdown file."""

    #: The info string after the fence (``python``, ``bash``, ...).
    info: str
    #: The block's text, ending with a newline.
    code: str
    #: 1-based line number of the block's first line of code.
    line: int
    #: The last non-blank line before the fence (a marker, or a caption naming a file).
    caption: str

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def marked_not_run(self) -> bool:
        return _MARKED.match(self.caption) is not None

    @property
    def not_run_reason(self) -> str | None:
        """Why the block is not run, when its marker gives a reason."""
        found = _REASON.match(self.caption)
        return found["reason"] if found else None

    @property
    def runs(self) -> bool:
        """A Python block that is not marked to be skipped."""
        return self.language == "python" and not self.marked_not_run


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Every fenced code block of ``markdown``, in order (CommonMark fences: three or more
    backticks or tildes; a block closes at a fence of the same character, at least as
    long)."""
    blocks: list[CodeBlock] = []
    lines = markdown.splitlines()
    caption = ""
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip():
                caption = lines[i].strip()
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            # CommonMark: up to the opening fence's indentation is removed from each line
            text = lines[j]
            body.append(text[min(indent, len(text) - len(text.lstrip(" "))) :])
            j += 1
        blocks.append(CodeBlock(opening["info"].strip(), "".join(f"{b}\n" for b in body),
                                i + 2, caption))
        caption = ""
        i = j + 1
    return blocks


def python_blocks(path: Path) -> list[CodeBlock]:
    """The blocks of ``path`` that :func:`run_blocks` runs."""
    return [b for b in code_blocks(path.read_text(encoding="utf-8")) if b.runs]


def unexplained_skips(path: Path) -> list[str]:
    """The Python blocks of ``path`` marked not-run without a reason, as ``file:line`` of
    their opening fence."""
    return [
        f"{path}:{b.line - 1}"
        for b in code_blocks(path.read_text(encoding="utf-8"))
        if b.language == "python" and b.marked_not_run and b.not_run_reason is None
    ]


def run_blocks(path: Path) -> int:
    """Run the Python blocks of ``path`` here, in order, in one namespace; return how many
    ran. An exception propagates, with the README's file name and line numbers in its
    traceback."""
    namespace: dict[str, object] = {"__name__": "__readme__"}
    blocks = python_blocks(path)
    for block in blocks:
        # padding puts the code at its own line numbers in the README
        source = "\n" * (block.line - 1) + block.code
        exec(compile(source, str(path), "exec"), namespace)  # running it is the point
    return len(blocks)


def assert_readme_runs(path: Path, *, timeout: float = 600) -> int:
    """Run the Python blocks of ``path`` in a fresh interpreter, in a temporary folder;
    raise ``AssertionError`` with the traceback if one fails, if none would run, or if a
    block is skipped without a reason. Return how many ran."""
    readme_output(path, timeout=timeout)
    return len(python_blocks(Path(path).resolve()))


def readme_output(path: Path, *, timeout: float = 600, cwd: Path | None = None) -> str:
    """What the Python blocks of ``path`` print, run as :func:`assert_readme_runs` runs
    them (and failing as it fails): for guides whose test checks what the reader sees.
    ``cwd``: run in that folder and keep what the blocks write there (by default, a
    temporary folder, removed afterwards), for guides whose test checks their files."""
    path = Path(path).resolve()
    unexplained = unexplained_skips(path)
    if unexplained:
        raise AssertionError(
            f"Python blocks marked not-run without a reason ('<!-- not-run: why -->'): "
            f"{', '.join(unexplained)}"
        )
    if not python_blocks(path):
        raise AssertionError(f"{path}: no Python block to run (all absent or marked not-run)")
    with tempfile.TemporaryDirectory(prefix="qcore-readme-") as folder:
        result = subprocess.run(
            [sys.executable, "-m", "qcore.testing.readme", str(path)],
            cwd=folder if cwd is None else cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if result.returncode != 0:
        raise AssertionError(
            f"{path}: a Python block failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
    return result.stdout


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m qcore.testing.readme README.md", file=sys.stderr)
        return 2
    ran = run_blocks(Path(args[0]))
    print(f"{args[0]}: {ran} Python blocks ran")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
