"""Which tox envs a change runs: the hosted workflow's path filter.

    python .ci/affected.py --base REV [--github-output FILE] [PATH ...]

Compares ``REV`` with ``HEAD`` (or takes the changed PATHs) and prints the envs, as JSON,
that ``repo.affected`` says those files reach: an env runs when a distribution it
installs (or one that distribution requires), a file it reads, or a file every env
shares changed. Without a usable base (a new branch, a first push) every env runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import repo

NO_BASE = {"", "0" * 40}


def changed_since(base: str) -> list[str] | None:
    """Paths changed between ``base`` and HEAD, or None when ``base`` is not usable."""
    if base in NO_BASE:
        return None
    done = subprocess.run(
        ["git", "diff", "--name-only", f"{base}...HEAD"],
        cwd=repo.ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout.split() if done.returncode == 0 else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="affected.py", description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="")
    parser.add_argument("--github-output", default=None)
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)
    changed = args.paths or changed_since(args.base)
    envs = repo.env_names() if changed is None else repo.affected(changed)
    line = f"envs={json.dumps(envs)}"
    print(line)
    if args.github_output:
        with open(args.github_output, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
