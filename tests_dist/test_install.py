"""The built wheels installed into fresh venvs, dependencies from the package index, the
way ``pip install qbackend-onednn`` will: one plugin alone, two in either order, and the
unrelated ``qcore`` from the index installed over ours."""

from __future__ import annotations

from collections.abc import Callable

from builds import Venv

DERIVED = "import qcore; print(type(qcore.get_quantizer('onednn')).__name__)"


def rows(listing: str) -> set[tuple[str, ...]]:
    """``qcore list``'s rows as (kind, name, distribution)."""
    return {tuple(line.split()[:3]) for line in listing.splitlines()[1:] if line.strip()}


def test_onednn_alone_lists_its_backend_and_names_the_extra_for_pt2e(
    venv: Callable[[str], Venv],
) -> None:
    env = venv("onednn")
    env.install("qcore-torch", "qbackend-onednn")
    assert ("backend", "onednn", "qbackend-onednn") in rows(env.run("qcore", "list").stdout)
    assert env.run("python", "-c", "import torchao", check=False).returncode != 0, (
        "an FX-only install must not bring torchao"
    )
    missing = env.run("python", "-c", DERIVED, check=False)
    assert missing.returncode != 0
    last = missing.stderr.strip().splitlines()[-1]
    assert "qcore-torch[pt2e]" in last and "ModuleNotFoundError" not in last, missing.stderr
    # the extra it names is all the derived quantizer needs
    env.install("qcore-torch[pt2e]", "qbackend-onednn")
    assert env.run("python", "-c", DERIVED).stdout.strip().endswith("Quantizer")


def test_two_plugins_in_either_order_list_the_same(venv: Callable[[str], Venv]) -> None:
    listings = []
    for first, second in [("qbackend-onednn", "qquantizer-xnnpack"),
                          ("qquantizer-xnnpack", "qbackend-onednn")]:  # fmt: skip
        env = venv(f"{first}-then-{second}")
        env.install("qcore-torch", first)
        env.install("qcore-torch", second)
        listings.append(env.run("qcore", "list").stdout)
    assert listings[0] == listings[1]
    assert {("backend", "onednn", "qbackend-onednn"),
            ("quantizer", "xnnpack", "qquantizer-xnnpack")} <= rows(listings[0])  # fmt: skip


def test_the_unrelated_qcore_installed_over_ours_is_named(venv: Callable[[str], Venv]) -> None:
    env = venv("foreign")
    env.install("qcore-torch", "qbackend-onednn")
    env.run("python", "-c", "import qcore.cli")  # ours, whole
    env.install_from_index("qcore==1.11.1")  # the unrelated library of the index
    done = env.run("qcore", "list", check=False)
    assert done.returncode == 2
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("qcore: error:")]
    assert "unrelated PyPI library" in line
    assert "pip uninstall qcore && pip install --force-reinstall qcore-torch" in line
