import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# reuse the parity helpers and the reference loader of the CI suite
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

#: Where ExecuTorch's quantizer binds torchao's pattern exporter by name, at its import.
REFERENCE_UTILS = "executorch.backends.xnnpack.quantizer.xnnpack_quantizer_utils"
EXPORTER = "_get_aten_graph_module_for_pattern"


@pytest.fixture(scope="session", autouse=True)
def reference_patterns_exported_once(conv_bn_patterns_exported_once: None) -> Iterator[None]:
    """ExecuTorch's annotate exports its eight conv-bn[-relu] patterns anew (strict
    ``torch.export``) at every call, on every model: three quarters of this env's time.
    Here it asks torchao's exporter for them, as it would outside the session, which the
    root conftest's ``conv_bn_patterns_exported_once`` makes export each pattern once
    (``qcore._torch_private.reused_pattern_graphs``: a pattern's graph depends on its code,
    its closure and its example inputs' shapes alone, and each caller gets its own copy;
    ``tests/test_qat.py`` checks, in a fresh interpreter, that torchao's QAT flow gives the
    same graph with it). ExecuTorch's matching and annotating are untouched."""
    import et_reference
    from torchao.quantization.pt2e import utils as torchao_utils

    et_reference.load()
    reference = sys.modules[REFERENCE_UTILS]
    bound = getattr(reference, EXPORTER)
    # torchao's exporter (or already the session's reusing one): nothing else is replaced
    assert bound.__module__ in {torchao_utils.__name__, "qcore._torch_private"}, bound

    def through_torchao(pattern: Any, example_inputs: Any, is_cuda: bool = False, **kw: Any) -> Any:
        return getattr(torchao_utils, EXPORTER)(pattern, example_inputs, is_cuda, **kw)

    setattr(reference, EXPORTER, through_torchao)
    try:
        yield
    finally:
        setattr(reference, EXPORTER, bound)
