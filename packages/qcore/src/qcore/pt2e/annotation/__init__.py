"""PT2E annotation: a namespaced annotator registry and a quantizer base driven by it.

Nothing heavy is imported here: ``registry`` is plain data; ``ops`` (operator sets),
``claims`` (claiming nodes, asking the scope), ``observable`` (can a tensor be observed),
``common_annotators`` (the ``"common"`` namespace's table), ``transforms`` (rewrites
before annotation), ``quantizer`` and ``report`` import torch, and most of them torchao,
when they are imported themselves. None of them registers anything on import.
"""
