"""PT2E annotation: a namespaced annotator registry and a quantizer base driven by it.

Nothing heavy is imported here: ``registry`` is plain data; ``quantizer``, ``common`` and
``report`` import torch and torchao when they are imported themselves.
"""
