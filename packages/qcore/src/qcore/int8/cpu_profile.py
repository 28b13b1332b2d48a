"""What the CPU that will run a quantized model does for int8, and how to name another one.

oneDNN's int8 convolution and matmul multiply uint8 activations by int8 weights. With VNNI
(AVX-512 VNNI, AVX-VNNI) or AMX the products are summed straight into 32 bits. Without it
(AVX2-only and pre-VNNI AVX-512 CPUs, e.g. AMD Zen 3, Intel Skylake-SP) oneDNN uses
``vpmaddubsw``, which adds two neighbouring products into a *saturating 16-bit* lane:
full-range activations times full-range weights overflow it, and the result is silently
wrong. torch only warns. Quantization defaults therefore depend on the *target* CPU:

* :func:`probe` reads this machine through torch's own probe
  (``torch.cpu.get_capabilities()``), honouring ``ONEDNN_MAX_CPU_ISA``, which caps the
  kernels oneDNN dispatches to;
* :func:`target` is what mappings and quantizers build for: a scoped override
  (:func:`targeting`), else a process-wide one (:func:`set_target`), else the
  ``QCORE_INT8_TARGET`` environment variable, else this machine. Name the target when
  quantizing on a build box for a fleet of other CPUs.

Targets are named ``host`` (probe this machine) or one of :data:`KNOWN_TARGETS`.
Importing this module imports no torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "ENV_TARGET",
    "KNOWN_TARGETS",
    "Int8Host",
    "parse_target",
    "probe",
    "set_target",
    "target",
    "targeting",
]

#: Environment variable naming the default target (a name from KNOWN_TARGETS, or "host").
ENV_TARGET = "QCORE_INT8_TARGET"


@dataclass(frozen=True)
class Int8Host:
    """The int8 features of one x86 CPU, as oneDNN's kernels use them.

    ``isa`` is the best int8 instruction set: ``amx``, ``avx512_vnni``, ``avx_vnni``,
    ``avx512``, ``avx2`` or ``baseline`` (no AVX2; also any non-x86 CPU). ``source`` says
    where the answer came from (``probed``, ``override``, or the environment variable).
    """

    isa: str
    avx2: bool
    avx512: bool
    vnni: bool
    amx: bool
    x86: bool = True
    source: str = "probed"

    @property
    def saturates_u8s8(self) -> bool:
        """Whether oneDNN's u8 x s8 int8 kernels add product pairs in saturating int16.

        True on x86 CPUs with AVX2 but neither VNNI nor AMX: full-range activations and
        weights can overflow there, so defaults must pick non-saturating ranges.
        """
        return self.x86 and self.avx2 and not (self.vnni or self.amx)

    def describe(self) -> str:
        """One line for people: the ISA and what it means for int8."""
        if not self.x86:
            return "non-x86 CPU: oneDNN's x86 int8 kernels do not apply"
        if self.amx:
            return "AMX: int8 matrix tiles, fast exact int8"
        if self.vnni:
            return f"{self.isa.upper().replace('_', '-')}: fast exact int8 (VNNI)"
        if self.saturates_u8s8:
            return (
                f"{self.isa.upper()} without VNNI: int8 products are summed in saturating "
                "16-bit lanes, so weight ranges are chosen per layer to avoid overflow "
                "and int8 speed-ups are smaller"
            )
        return "no AVX2: oneDNN's int8 kernels run slowly on this CPU"


KNOWN_TARGETS: Mapping[str, Int8Host] = {
    "amx": Int8Host("amx", avx2=True, avx512=True, vnni=True, amx=True),
    "avx512_vnni": Int8Host("avx512_vnni", avx2=True, avx512=True, vnni=True, amx=False),
    "avx_vnni": Int8Host("avx_vnni", avx2=True, avx512=False, vnni=True, amx=False),
    "avx512": Int8Host("avx512", avx2=True, avx512=True, vnni=False, amx=False),
    "avx2": Int8Host("avx2", avx2=True, avx512=False, vnni=False, amx=False),
    "baseline": Int8Host("baseline", avx2=False, avx512=False, vnni=False, amx=False),
}
"""Named targets, from the newest int8 ISA down."""

#: oneDNN's ONEDNN_MAX_CPU_ISA values, mapped to the best of our targets they allow.
_ONEDNN_ISA_CAP: Mapping[str, str] = {
    "sse41": "baseline",
    "avx": "baseline",
    "avx2": "avx2",
    "avx2_vnni": "avx_vnni",
    "avx2_vnni_2": "avx_vnni",
    "avx512_core": "avx512",
    "avx512_core_vnni": "avx512_vnni",
    "avx512_core_bf16": "avx512_vnni",
    "avx10_1_512": "avx512_vnni",
    "avx512_core_fp16": "avx512_vnni",
}
_RANK: list[str] = list(reversed(list(KNOWN_TARGETS)))  # baseline < avx2 < ... < amx

_scoped: ContextVar[Int8Host | None] = ContextVar("qcore_int8_target", default=None)
#: set_target's choice; a one-slot list rather than a rebound global
_process_target: list[Int8Host | None] = [None]


def _from_capabilities(caps: Mapping[str, Any]) -> Int8Host:
    if caps.get("architecture", "x86_64") not in {"x86_64", "x86", "AMD64", "i386", "i686"}:
        return Int8Host("baseline", False, False, False, False, x86=False)
    avx512 = bool(caps.get("avx512_bw") and caps.get("avx512_vl"))
    if caps.get("amx_int8") and caps.get("amx_tile"):
        return KNOWN_TARGETS["amx"]
    if avx512 and caps.get("avx512_vnni"):
        return KNOWN_TARGETS["avx512_vnni"]
    if caps.get("avx_vnni") and caps.get("avx2"):
        return KNOWN_TARGETS["avx_vnni"]
    if avx512:
        return KNOWN_TARGETS["avx512"]
    if caps.get("avx2"):
        return KNOWN_TARGETS["avx2"]
    return KNOWN_TARGETS["baseline"]


def _cap_by_onednn_env(found: Int8Host, value: str | None) -> Int8Host:
    """oneDNN never dispatches above ``ONEDNN_MAX_CPU_ISA``; neither does our answer."""
    if not value:
        return found
    cap = _ONEDNN_ISA_CAP.get(value.strip().lower())
    if cap is None or not found.x86:
        return found
    return found if _RANK.index(found.isa) <= _RANK.index(cap) else KNOWN_TARGETS[cap]


def probe() -> Int8Host:
    """This machine's int8 features, from torch's own CPU probe."""
    import torch

    caps = torch.cpu.get_capabilities()
    found = _from_capabilities(caps)
    env = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return _cap_by_onednn_env(found, env)


def parse_target(spec: str | Int8Host) -> Int8Host:
    """An :class:`Int8Host` from a target name (``host`` probes this machine)."""
    if isinstance(spec, Int8Host):
        return spec
    name = spec.strip().lower().replace("-", "_")
    if name == "host":
        return probe()
    if name not in KNOWN_TARGETS:
        raise ValueError(
            f"unknown int8 target {spec!r}; known: host, {', '.join(KNOWN_TARGETS)}"
        )
    return KNOWN_TARGETS[name]


def set_target(spec: str | Int8Host | None) -> None:
    """Name the CPU quantized models are built for, process-wide (None: back to default)."""
    _process_target[0] = None if spec is None else replace(parse_target(spec), source="override")


@contextmanager
def targeting(spec: str | Int8Host) -> Iterator[Int8Host]:
    """Build for ``spec`` inside the block, e.g. ``with qcore.host.targeting("avx2"):``."""
    chosen = replace(parse_target(spec), source="override")
    token = _scoped.set(chosen)
    try:
        yield chosen
    finally:
        _scoped.reset(token)


def target() -> Int8Host:
    """The CPU that mappings and quantizers build for (see the module docstring)."""
    scoped = _scoped.get()
    if scoped is not None:
        return scoped
    if _process_target[0] is not None:
        return _process_target[0]
    env = os.environ.get(ENV_TARGET)
    if env:
        try:
            return replace(parse_target(env), source=ENV_TARGET)
        except ValueError as exc:
            raise ValueError(f"{ENV_TARGET}={env!r}: {exc}") from None
    return probe()
