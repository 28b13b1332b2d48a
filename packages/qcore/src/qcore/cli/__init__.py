"""The ``qcore`` command: list, show and check installed plugins, and run the demo."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from _qcore_torch.identity import CORE_DISTRIBUTION, foreign_qcore_reason

from qcore._version import __version__
from qcore.cli import errors as cli_errors
from qcore.cli.errors import CommandError
from qcore.cli.paths import PLOT_SUFFIXES, check_distinct, check_output_path
from qcore.cli.tables import terminal_width
from qcore.errors import MissingExtraError, PluginError, PluginNotFoundError
from qcore.plugin_api import GROUPS, PLUGIN_API_VERSION, PT2E_EXTRA
from qcore.plugins.discovery import REGISTRY
from qcore.plugins.extras import (
    DEMO_EXTRA,
    DEMO_MODULES,
    PLOT_MODULE,
    PT2E_KINDS,
    install_command,
    require_extra,
    require_pt2e,
)
from qcore.pt2e.derived.names import derived_names, derived_rows, is_disabled

# Upstream notices nobody running this command can act on: torchao's loader messages for
# CUDA-only libraries on a CPU machine, torch's pytree deprecation, the export notice for
# RNN weights, torch's probe for the optional NumPy, the deprecation of quantized tensors,
# and of ``reduce_range`` when a derived quantizer reads a backend's observers; and torch's
# CUDA build (the index's default) saying it found no CUDA runtime when Inductor compiles
# C++ for the CPU.
_NOISY_LOGGERS = ("torchao", "torch.utils._pytree", "torch.utils.cpp_extension")
_NOISY_WARNINGS = (
    r".*were assigned during export",
    r"Failed to initialize NumPy",
    r".*quantized tensor creation functions",
    r"Please use quant_min and quant_max to specify the range",
)


def _quiet_upstream_noise() -> None:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for message in _NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=message)


def _cmd_list(_: argparse.Namespace) -> int:
    from qcore.cli.describe import describe_plugins
    from qcore.plugins.api import list_plugins

    foreign = foreign_qcore_reason()
    if foreign:
        print(f"warning: {foreign}", file=sys.stderr)
    plugins = list_plugins()
    print(describe_plugins([*plugins, *derived_rows(plugins)], width=terminal_width()))
    return 0


def _resolve(spec: str, kinds: Sequence[str], command: str) -> list[tuple[str, str]]:
    """``name`` or ``kind:name`` to the (kind, name) pairs it denotes among ``kinds``, the
    kinds ``qcore command`` takes. A quantizer derived from a backend is denoted by
    ``quantizer:name``, or by ``name`` when nothing else has that name."""
    kind, _, name = spec.rpartition(":")
    if kind and kind not in kinds:
        raise _kind_error(spec, kind, kinds, command)
    candidates = [kind] if kind else list(kinds)
    found = [(k, name) for k in candidates if name in REGISTRY.names(k)]
    if not found or kind:
        found = [(k, name) for k in candidates if name in _names(k)]
    if not found:
        known = sorted({n for k in candidates for n in _names(k)})
        raise PluginNotFoundError(f"unknown plugin '{spec}' (known: {', '.join(known) or 'none'})")
    return found


def _kind_error(spec: str, kind: str, kinds: Sequence[str], command: str) -> CommandError:
    """A kind the command does not take, or no kind at all (a typo), said on one line with
    the kinds it takes."""
    takes = f"the kinds qcore {command} takes: {', '.join(kinds)}"
    if kind in GROUPS:
        message = f"qcore {command} does not take kind '{kind}' ('{spec}'); {takes}"
    else:
        close = difflib.get_close_matches(kind, kinds, n=1)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        message = f"unknown kind '{kind}' in '{spec}'{guess}; {takes}"
    return CommandError(
        message, "'qcore list' shows each plugin's kind and name; a NAME alone matches any kind"
    )


def _cmd_show(args: argparse.Namespace) -> int:
    from qcore.cli.describe import DESCRIBERS

    failed = False
    targets = _resolve(args.name, list(DESCRIBERS), "show")
    for kind, name in targets:
        try:
            if kind in PT2E_KINDS:
                require_pt2e(f"qcore show {kind}:{name}")
            print(DESCRIBERS[kind](name))
        except PluginError as exc:  # one broken kind must not hide the others
            # alone, a missing extra is the command's error: one line and a hint
            if args.debug or (isinstance(exc, MissingExtraError) and len(targets) == 1):
                raise
            message = f"{kind} {name}: error: {cli_errors.error_line(exc)}"
            # unbroken at hyphens: "qcore-" / "torch[pt2e]" would not paste as one command
            text = textwrap.fill(
                message, terminal_width(), subsequent_indent="  ", break_on_hyphens=False
            )
            print(text + "\n")
            failed = True
    return 1 if failed else 0


def _cmd_check(args: argparse.Namespace) -> int:
    from qcore.testing import CheckResult, check_backend, check_quantizer

    runners: dict[str, Callable[..., Sequence[CheckResult]]] = {
        "backend": check_backend,
        "quantizer": check_quantizer,
    }
    targets = (
        list(dict.fromkeys(p for spec in args.names for p in _check_targets(spec, list(runners))))
        if args.names
        else [
            (k, n)
            for k in runners
            for n in _names(k)
            if not _disabled(k, n) and (k, n) not in _derived_without_mapping()
        ]
    )
    if args.names:  # a name that needs a missing extra is the command's error, said at once
        named = {_resolve(s, list(runners), "check")[0] for s in args.names if ":" in s}
        for kind, name in targets:  # (a derived quantizer a bare NAME brings in is skipped)
            if kind in PT2E_KINDS and (not _is_derived(kind, name) or (kind, name) in named):
                require_pt2e(f"qcore check {kind}:{name}")
    if targets:
        _progress("checking " + ", ".join(_target_text(k, n) for k, n in targets))
    failed, skipped = 0, 0
    for index, (kind, name) in enumerate(targets, start=1):
        step = f"[{index}/{len(targets)}] {kind}:{name}"
        _progress(f"{step} ...")
        started = time.perf_counter()
        outcome = "failed"
        try:
            results = runners[kind](name, progress=_Ticker(step))
        except MissingExtraError as exc:
            if _is_derived(kind, name):  # cannot exist without the extra: not installed
                print(f"SKIP {kind}:{name} (derived from backend {name}): {exc.need}")
                skipped += 1
                outcome = "skipped"
            else:  # its distribution requires the extra, and the extra is missing
                owner = REGISTRY.distribution(kind, name)
                print(f"FAIL {kind}:{name} ({owner} is installed): {exc.need}")
                failed += 1
        except PluginError as exc:
            print(f"FAIL {kind}:{name}: {exc}")
            failed += 1
        else:
            bad = [r for r in results if not getattr(r, "ok", False)]
            for r in bad if not args.verbose else results:
                print(r)
            print(f"{kind}:{name}: {len(results) - len(bad)} passed, {len(bad)} failed")
            failed += bool(bad) or not results
            outcome = "failed" if bad or not results else "passed"
        _progress(f"{step} {outcome} in {time.perf_counter() - started:.1f} s")
    if skipped:
        print(
            f"checked {len(targets) - skipped} of {len(targets)}; skipped {skipped} that need "
            f"{CORE_DISTRIBUTION}'s '{PT2E_EXTRA}' extra: {install_command(PT2E_EXTRA)}"
        )
    return 1 if failed else 0


def _check_targets(spec: str, runners: Sequence[str]) -> list[tuple[str, str]]:
    """What ``qcore check SPEC`` runs: a bare NAME is every kind registered under it and
    the quantizer derived from its backend; ``kind:name`` is that one."""
    found = _resolve(spec, runners, "check")
    if ":" in spec:
        return found
    for _, name in list(found):
        derived = ("quantizer", name)
        if derived not in found and _is_derived(*derived) and _has_mapping(name):
            found.append(derived)
    return found


def _has_mapping(backend: str) -> bool:
    """Whether backend ``backend`` loads and has a mapping to derive a quantizer from (a
    broken one fails its own check; one without a mapping derives nothing)."""
    try:
        return REGISTRY.load("backend", backend).qconfig_mapping is not None
    except PluginError:
        return False


def _target_text(kind: str, name: str) -> str:
    return f"{kind}:{name}" + (f" (derived from backend {name})" if _is_derived(kind, name) else "")


class _Ticker:
    """Progress of one long check on stderr: how far, and about how long is left, at most
    every ``every`` seconds (a kit's quantizer half can take minutes)."""

    def __init__(self, step: str, every: float = 10.0) -> None:
        self.step, self.every = step, every
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int, unit: str) -> None:
        now = time.perf_counter()
        if done == 0 or now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.start
        left = elapsed / done * (total - done)
        _progress(f"{self.step}: {done}/{total} {unit} in {elapsed:.0f} s, about {left:.0f} s left")


def _progress(line: str) -> None:
    """A progress line on stderr, after the results printed so far: stdout stays the
    results alone, and on a terminal the two interleave in order."""
    sys.stdout.flush()
    print(line, file=sys.stderr, flush=True)


def _is_derived(kind: str, name: str) -> bool:
    return kind == "quantizer" and name not in REGISTRY.names(kind) and name in derived_names()


def _names(kind: str) -> list[str]:
    """Plugin names of ``kind``; quantizers include those derived from backends."""
    derived = derived_names() if kind == "quantizer" else []
    return sorted({*REGISTRY.names(kind), *derived})


def _derived_without_mapping() -> set[tuple[str, str]]:
    """Derived quantizers of backends that declare no QConfigMapping: nothing to derive
    from, so ``qcore check`` does not count them as failures (the backend's own check
    loads it and reports any error)."""
    missing = set()
    for name in derived_names():
        try:
            plugin = REGISTRY.load("backend", name)
        except PluginError:
            continue
        if plugin.qconfig_mapping is None:
            missing.add(("quantizer", name))
    return missing


def _disabled(kind: str, name: str) -> bool:
    if _is_derived(kind, name):  # no row of its own: disabled by its name or its backend's
        return is_disabled(name)
    return any(p.status == "disabled" for p in REGISTRY.info() if (p.kind, p.name) == (kind, name))


def _cmd_host(args: argparse.Namespace) -> int:
    from qcore.int8.cpu_profile import probe, target

    here, chosen = probe(), target()
    entries = [("this CPU", here)]
    if chosen != here:
        entries.append((f"target ({chosen.source})", chosen))
    for label, cpu in entries:
        print(f"{label}: {cpu.isa}")
        print(textwrap.fill(cpu.describe(), width=78, initial_indent="  ", subsequent_indent="  "))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.json is not None:
        check_output_path("--json", args.json)
    if args.plot is not None:
        check_output_path("--plot", args.plot, PLOT_SUFFIXES)
    check_distinct({"--json": args.json, "--plot": args.plot})
    plotting = (PLOT_MODULE,) if args.plot is not None else ()
    require_extra("qcore demo", DEMO_EXTRA, [*DEMO_MODULES, *plotting])
    from qcore.demo import run_demo
    from qcore.demo.flows import discover_flows

    only: list[str] = args.only or []
    if only:  # a mistyped name fails now, not after the model trained
        names = sorted({flow.plugin for flow in discover_flows()})
        unknown = [name for name in only if name not in names]
        if unknown:
            raise CommandError(
                f"--only {unknown[0]}: no installed flow uses a plugin of that name",
                f"the plugins with a flow here: {', '.join(names) or 'none'}",
            )
    return run_demo(plot=args.plot, json_path=args.json, retrain=args.retrain, only=only)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qcore", description=__doc__)
    parser.add_argument(
        "--version",
        action="version",
        version=f"{CORE_DISTRIBUTION} {__version__} (plugin API {PLUGIN_API_VERSION})",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error instead of a hint"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="installed plugins (reads metadata only)").set_defaults(
        func=_cmd_list
    )
    show = sub.add_parser("show", help="a backend's patterns or a quantizer's annotators")
    show.add_argument("name", help="plugin name, or kind:name")
    show.set_defaults(func=_cmd_show)
    check = sub.add_parser(
        "check",
        help="run the conformance kit (progress on stderr); non-zero exit on failure",
    )
    check.add_argument(
        "names",
        nargs="*",
        help="NAME: every kind registered under it and the quantizer derived from its backend; "
        "kind:NAME: that one (default: every backend and quantizer, derived ones included)",
    )
    check.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    check.set_defaults(func=_cmd_check)
    sub.add_parser(
        "host", help="what this CPU (and the named target, QCORE_INT8_TARGET) does for int8"
    ).set_defaults(func=_cmd_host)
    demo = sub.add_parser("demo", help="every installed flow on a real task, compared")
    demo.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help=f"per-layer error chart ({', '.join(PLOT_SUFFIXES)})",
    )
    demo.add_argument("--json", type=Path, metavar="FILE", help="the table as JSON")
    demo.add_argument("--retrain", action="store_true", help="ignore the cached model")
    demo.add_argument(
        "--only",
        action="append",
        metavar="PLUGIN",
        help="run only the flows of this backend or quantizer plugin (repeatable)",
    )
    demo.set_defaults(func=_cmd_demo)
    for command in sub.choices.values():  # `qcore show x --debug` works too
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return parser


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush to a closed pipe
    does not print a second error (the recipe of Python's signal documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_upstream_noise()
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `qcore show onednn | head`: the reader left, nothing to say
        _silence_stdout()
        return 1
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("qcore: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure: one line and a hint, unless --debug
        if args.debug:
            raise
        print(f"qcore: error: {cli_errors.error_line(exc)}", file=sys.stderr)
        print(f"hint: {cli_errors.hint(exc)}", file=sys.stderr)
        return cli_errors.status(exc)
    return code
