"""docs/write-a-backend.md, run as written: its files and commands make a plugin that
`qcore list` shows and `qcore check` passes.

The guide's blocks become one bash script, in order: a block under a `` `path`: ``
caption is written to that path, a ``bash`` block runs as it is (blocks after
``<!-- not-run -->``, such as publishing, are skipped). The script runs in a temporary
folder with this interpreter's environment first on PATH, so ``pip``, ``python`` and
``qcore`` are the ones under test. The only liberty taken: ``pip install`` runs offline
(``--no-index``) and builds with the installed hatchling (``--no-build-isolation``), so the
test needs no network. The plugin is uninstalled afterwards, whatever happens.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from qcore.testing.readme import CodeBlock, code_blocks

GUIDE = Path(__file__).parents[1] / "docs" / "write-a-backend.md"
DISTRIBUTION = "qbackend-mychip"
PLUGIN = "mychip"

_FILE_CAPTION = re.compile(r"^`(?P<path>[\w./-]+)`:$")
_END = "QCORE_GUIDE_END_OF_FILE"

# pip as the guide's reader has it, but offline and with the build backend installed here
_PRELUDE = f"""\
set -euo pipefail
pip() {{
    if [ "$1" = install ]; then
        shift
        command {shlex.quote(sys.executable)} -m pip install --no-index --no-build-isolation "$@"
    else
        command {shlex.quote(sys.executable)} -m pip "$@"
    fi
}}
"""


def _file_path(block: CodeBlock) -> str | None:
    match = _FILE_CAPTION.match(block.caption)
    return match["path"] if match else None


def guide_script(markdown: str) -> tuple[str, list[str], list[str]]:
    """The bash script the guide amounts to, the files it writes and the commands it runs."""
    parts, files, commands = [_PRELUDE], [], []
    for block in code_blocks(markdown):
        path = _file_path(block)
        if path is not None:
            assert _END not in block.code, f"{path} contains the heredoc terminator"
            files.append(path)
            parts.append(
                f'mkdir -p "$(dirname {shlex.quote(path)})"\n'
                f"cat > {shlex.quote(path)} <<'{_END}'\n{block.code}{_END}\n"
            )
        elif block.language == "bash" and not block.marked_not_run:
            commands += [line.strip() for line in block.code.splitlines() if line.strip()]
            parts.append(f"echo '### docs/write-a-backend.md line {block.line}'\n{block.code}")
    return "\n".join(parts), files, commands


def _uninstall() -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "-y", "-q", DISTRIBUTION],
        capture_output=True,
        check=False,
    )


def _listing(stdout: str) -> list[str]:
    """The rows the guide's own ``qcore list`` printed: from its header line to the first
    blank line."""
    lines = stdout.splitlines()
    header = ["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS"]
    start = next((i for i, line in enumerate(lines) if line.split() == header), None)
    assert start is not None, f"no `qcore list` table in:\n{stdout}"
    rows = lines[start + 1 :]
    return rows[: rows.index("")] if "" in rows else rows


def test_the_guide_builds_a_plugin_that_qcore_lists_and_checks(tmp_path: Path) -> None:
    script, files, commands = guide_script(GUIDE.read_text(encoding="utf-8"))
    assert "pyproject.toml" in files and any(f.startswith("src/") for f in files), files
    for command in ("pip install .", "qcore list", f"qcore check {PLUGIN}"):
        assert command in commands, f"the guide no longer runs `{command}`"

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    _uninstall()  # a run that was killed may have left it installed
    try:
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        _uninstall()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    rows = {tuple(line.split()[:3]) for line in _listing(result.stdout)}
    assert {("backend", PLUGIN, DISTRIBUTION), ("quantizer", PLUGIN, DISTRIBUTION)} <= rows
    for kind in ("backend", "quantizer"):
        summary = re.search(rf"^{kind}:{PLUGIN}: (\d+) passed, (\d+) failed$", output, re.M)
        assert summary is not None, output
        assert int(summary[1]) > 0 and summary[2] == "0", summary[0]
    assert (tmp_path / "qbackend-mychip" / ".github" / "workflows" / "ci.yml").is_file()


def _first_column(markdown: str, header: str) -> list[str]:
    """The first cells (code spans) of the table whose header row starts with ``header``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append(re.match(r"\| `([A-Za-z_0-9]+)", line)[1])  # type: ignore[index]
    return cells


def test_the_guide_lists_every_op_family_and_every_dtype_preset() -> None:
    from torch.ao.quantization.backend_config import DTypeConfig, DTypeWithConstraints

    import qcore.fx.dtypes
    import qcore.fx.patterns

    guide = GUIDE.read_text(encoding="utf-8")
    families = sorted(n for n in qcore.fx.patterns.__all__ if n.endswith("_configs"))
    assert sorted(_first_column(guide, "family")) == families
    public = {n: v for n, v in vars(qcore.fx.dtypes).items() if n.isupper()}
    presets = sorted(n for n, v in public.items() if isinstance(v, DTypeConfig))
    assert sorted(_first_column(guide, "preset")) == presets
    built_from = sorted(n for n, v in public.items() if isinstance(v, DTypeWithConstraints | float))
    listed = guide[guide.index("plus the constraints they are built from") :].split(")")[0]
    assert sorted(re.findall(r"`([A-Z_0-9]+)`", listed)) == built_from


def test_the_guide_says_when_each_backend_plugin_field_matters() -> None:
    import dataclasses

    from qcore.plugin_api import BackendPlugin

    fields = {f.name: f for f in dataclasses.fields(BackendPlugin)}
    guide = GUIDE.read_text(encoding="utf-8")
    listed = _first_column(guide, "field")
    assert sorted(listed) == sorted(fields) and len(listed) == len(fields)  # each field once
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2].strip(" `")
        for line in guide.splitlines()
        if line.startswith("| `") and line.split("|")[1].strip(" `") in fields
    }
    for name, field in fields.items():  # the default column is the dataclass's
        if field.default is dataclasses.MISSING:
            assert rows[name] == "required", name
        elif name != "api_version":
            assert rows[name] == repr(field.default).replace("'", '"'), name
