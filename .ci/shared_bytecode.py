"""Third-party bytecode compiled once per run, not once per tox env.

    python .ci/shared_bytecode.py        # in a tox env (tox.ini's commands_pre)

Every env installs the same torch, torchao and transformers (hard links of one uv cache
entry) at its own path, so each compiled their bytecode again on first import: ~2,800
modules, 8 s of CPU per env on a VNNI core and about twice that on an AVX2 one, in each
of a dozen envs. This installs ``bytecode_hook.py`` into the running env's site-packages,
with a ``.pth`` line that activates it at every interpreter start (the test processes and
the fresh interpreters their tests start), naming this repository's packages as the
first-party ones it leaves alone. tox.ini sets ``QCI_SHARED_BYTECODE``, one folder per
torch row.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

import bytecode_hook
import repo

MODULE = "_qci_bytecode_hook"


def install(site_packages: Path, first_party: list[str]) -> None:
    """The hook as ``site_packages/_qci_bytecode_hook.py``, activated by a ``.pth``."""
    shutil.copyfile(bytecode_hook.__file__, site_packages / f"{MODULE}.py")
    line = f"import {MODULE}; {MODULE}.activate({','.join(sorted(first_party))!r})\n"
    (site_packages / f"{MODULE}.pth").write_text(line)


def main() -> int:
    names = [distribution.import_name for distribution in repo.distributions().values()]
    install(Path(sysconfig.get_paths()["purelib"]), names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
