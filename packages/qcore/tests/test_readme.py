"""qcore's README examples run; the README runner finds, skips and fails blocks as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from qcore.testing.readme import (
    assert_readme_runs,
    code_blocks,
    python_blocks,
    run_blocks,
    unexplained_skips,
)

README = Path(__file__).parents[1] / "README.md"

SAMPLE = """\
# A package

```bash
pip install thing
```

```python
x = 40
```

Needs a model you bring:

<!-- not-run: needs a model you bring -->
```python
quantize(model)
```

<!--   not-run :   takes minutes   -->
```python
raise RuntimeError("never runs")
```

````markdown
```python
nested = "a fence inside a longer fence is text"
```
````

```python
assert x + 2 == 42
```
"""


def test_qcore_readme_examples_run() -> None:
    assert assert_readme_runs(README) >= 2


def test_blocks_are_found_with_their_language_line_and_caption() -> None:
    blocks = code_blocks(SAMPLE)
    assert [b.language for b in blocks] == ["bash", "python", "python", "python", "markdown",
                                            "python"]
    assert blocks[0].code == "pip install thing\n"
    assert blocks[1].line == SAMPLE.splitlines().index("x = 40") + 1
    assert blocks[2].not_run_reason == "needs a model you bring"
    assert blocks[3].not_run_reason == "takes minutes"
    assert "nested = " in blocks[4].code
    assert [b.runs for b in blocks] == [False, True, False, False, False, True]


def test_blocks_share_one_namespace_and_skip_marked_ones(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(SAMPLE)
    assert len(python_blocks(readme)) == 2
    assert run_blocks(readme) == 2
    assert assert_readme_runs(readme) == 2


def test_a_failing_block_fails_with_the_readme_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(SAMPLE.replace("x + 2 == 42", "x + 2 == 43"))
    line = readme.read_text().splitlines().index("assert x + 2 == 43") + 1
    with pytest.raises(AssertionError, match=rf'File ".*README\.md", line {line}'):
        assert_readme_runs(readme)


def test_a_readme_with_nothing_to_run_fails(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Nothing\n\n<!-- not-run: no -->\n```python\nimport nothing\n```\n")
    with pytest.raises(AssertionError, match="no Python block to run"):
        assert_readme_runs(readme)


@pytest.mark.parametrize("marker", ["<!-- not-run -->", "<!-- not-run: -->", "<!-- not-run:   -->"])
def test_a_skip_without_a_reason_fails(tmp_path: Path, marker: str) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"```python\nx = 1\n```\n\n{marker}\n```python\nimport nothing\n```\n")
    assert unexplained_skips(readme) == [f"{readme}:6"]
    with pytest.raises(AssertionError, match=r"without a reason.*README\.md:6"):
        assert_readme_runs(readme)
