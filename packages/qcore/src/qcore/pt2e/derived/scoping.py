"""The qconfig ``prepare_fx`` gives a call, from a ``QConfigMapping``.

torch's rules (``_generate_node_name_to_qconfig``): a module call takes its module name's
qconfig (the nearest named parent counts), else the first matching name regex, else its
type's, else the global one; a function or method call starts from its own object-type
qconfig (else the global one), and the enclosing module's name, regex and type override it.
"""

from __future__ import annotations

import re
from typing import Any

from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.qconfig import QConfigAny

from qcore.pt2e.derived.sources import Call, qualified_name


def _by_name(mapping: QConfigMapping, path: str) -> tuple[bool, QConfigAny]:
    while path:
        if path in mapping.module_name_qconfigs:
            return True, mapping.module_name_qconfigs[path]
        path = path.rpartition(".")[0]
    return False, None


def _object_type(mapping: QConfigMapping, key: Any) -> tuple[bool, QConfigAny]:
    wanted = qualified_name(key) if isinstance(key, type) else key
    for k, v in mapping.object_type_qconfigs.items():
        if k is key or (isinstance(k, type) and qualified_name(k) == wanted) or k == wanted:
            return True, v
    return False, None


def _adjust(mapping: QConfigMapping, type_key: Any, path: str, fallback: QConfigAny) -> QConfigAny:
    found, qconfig = _object_type(mapping, type_key)
    result = qconfig if found else fallback
    for pattern, q in mapping.module_name_regex_qconfigs.items():
        if re.match(pattern, path):
            result = q
            break
    found, qconfig = _by_name(mapping, path)
    return qconfig if found else result


def qconfig_for(mapping: QConfigMapping, call: Call, element: Any) -> QConfigAny:
    """The qconfig ``prepare_fx`` would give ``call`` (which matched ``element``)."""
    if call.is_module:
        return _adjust(mapping, call.signature.removeprefix("module:"), call.path,
                       mapping.global_qconfig)  # fmt: skip
    found, own = _object_type(mapping, element)
    return _adjust(mapping, call.scope_type, call.path, own if found else mapping.global_qconfig)
