"""What the index shows of each distribution: names, requirements, license, URLs,
classifiers and the README as its page, read from the built wheels and sdists."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from builds import ROOT, repo
from packaging.requirements import Requirement
from packaging.version import Version

NAMES = sorted(d.name for d in repo.distributions().values())
#: Markdown links and images whose target is not an absolute URL or an anchor.
RELATIVE_LINK = re.compile(r"\]\((?!https://|http://|#)([^)]+)\)")


#: One constraints file per torch row of the matrix.
ROWS = sorted((ROOT / "constraints").glob("torch*.txt"))


def pins(path: Path) -> dict[str, Version]:
    """What a constraints file pins, the files it takes with ``-c`` included."""
    found: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        if line.startswith("-c "):
            found |= pins(path.parent / line.removeprefix("-c ").strip())
        elif "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            found[name.strip()] = Version(version.strip())
    return found


def pinned(name: str, path: Path = ROOT / "constraints.txt") -> Version:
    """The version a constraints file pins (by default the default row's, which the
    whole matrix tests)."""
    version = pins(path).get(name)
    assert version is not None, f"{path.name} pins no {name}"
    return version


def test_each_row_pins_its_own_torch_and_the_default_row_is_the_newest() -> None:
    assert [p.name for p in ROWS] == ["torch2.13.txt", "torch2.14.txt", "torch2.15.txt"]
    torches = [pinned("torch", row) for row in ROWS]
    assert [f"torch{v.major}.{v.minor}.txt" for v in torches] == [p.name for p in ROWS]
    assert pinned("torch") == max(torches)
    # every row tests the same torchao, tools and test-only packages: only torch differs
    assert {name: v for name, v in pins(ROWS[0]).items() if name != "torch"} == {
        name: v for name, v in pins(ROOT / "constraints.txt").items() if name != "torch"
    }


def metadata_of(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(path).decode())


def requirements(meta: Message, extra: str | None = None) -> dict[str, Requirement]:
    """Requirements without a marker (``extra=None``), or those of one extra."""
    found = {}
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if (req.marker is None) if extra is None else bool(req.marker and req.marker.evaluate({"extra": extra})):
            found[req.name] = req
    return found


def test_twine_accepts_every_wheel_and_sdist(built: dict[str, tuple[Path, Path]]) -> None:
    files = [str(path) for pair in built.values() for path in pair]
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == len(files)


@pytest.mark.parametrize("name", NAMES)
def test_license_ships_in_wheel_and_sdist(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    wheel, sdist = built[name]
    meta = metadata_of(wheel)
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta.get_all("License-File") == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text()
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(path).decode() == license_text
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/LICENSE")
        assert member is not None and member.read().decode() == license_text


@pytest.mark.parametrize("name", NAMES)
def test_urls_and_classifiers(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    meta = metadata_of(built[name][0])
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) >= {"Homepage", "Documentation", "Source", "Issues"}
    home = metadata_of(built["qcore-torch"][0]).get_all("Project-URL")[0].split(", ")[1]
    assert all(url.startswith(home) for url in urls.values()), urls
    classifiers = meta.get_all("Classifier") or []
    tested = {f"{sys.version_info.major}.{sys.version_info.minor}"}
    declared = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.match(r".*Python :: 3\.\d+$", c)}
    assert declared == tested, f"{name} declares Python {declared}; the matrix tests {tested}"
    assert any(c.startswith("Operating System :: ") for c in classifiers)
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert "Typing :: Typed" in classifiers


@pytest.mark.parametrize("name", NAMES)
def test_requirements_name_our_core_and_the_tested_torch(
    name: str, built: dict[str, tuple[Path, Path]]
) -> None:
    meta = metadata_of(built[name][0])
    plain = requirements(meta)
    # the index's "qcore" is an unrelated library: nothing may ever resolve to it
    assert "qcore" not in plain and "qcore" not in requirements(meta, "pt2e")
    torch = plain["torch"]
    for row in ROWS:  # every torch the matrix tests, and none older or newer
        assert torch.specifier.contains(pinned("torch", row)), f"{name} refuses {row.name}'s torch"
    oldest, newest = pinned("torch", ROWS[0]), pinned("torch", ROWS[-1])
    next_minor = Version(f"{newest.major}.{newest.minor + 1}")
    assert not torch.specifier.contains(next_minor), f"{name} admits untested torch {torch}"
    assert not torch.specifier.contains(Version(f"{oldest.major}.{oldest.minor - 1}.99"))
    if name != "qcore-torch":
        core = plain["qcore-torch"]
        assert core.specifier.contains(Version(meta["Version"]))
        uses_pt2e = name in {"qquantizer-xnnpack", "qinductor-x86"}
        assert core.extras == ({"pt2e"} if uses_pt2e else set()), core
        assert "torchao" not in plain  # declared once, by qcore-torch's pt2e extra


def test_torchao_is_the_pt2e_extra_at_the_tested_version(
    built: dict[str, tuple[Path, Path]],
) -> None:
    meta = metadata_of(built["qcore-torch"][0])
    assert "torchao" not in requirements(meta)
    torchao = requirements(meta, "pt2e")["torchao"]
    assert torchao.specifier.contains(pinned("torchao"))
    next_minor = Version(f"{pinned('torchao').major}.{pinned('torchao').minor + 1}")
    assert not torchao.specifier.contains(next_minor)
    assert "torchao" in requirements(meta, "demo")


@pytest.mark.parametrize("name", NAMES)
def test_readme_reads_right_on_the_index(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    meta = metadata_of(built[name][0])
    assert meta["Description-Content-Type"] == "text/markdown"
    page = meta.get_payload()
    assert isinstance(page, str) and page.startswith("# ")
    assert not RELATIVE_LINK.findall(page), f"relative links break on the index: {RELATIVE_LINK.findall(page)}"
    assert re.search(rf"^pip install \"?{re.escape(name)}(\[\w+\])?\"?\s*(#.*)?$", page, re.M), (
        f"{name}'s page has no install line that works from the index"
    )
