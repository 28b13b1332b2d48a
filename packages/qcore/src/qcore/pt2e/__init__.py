"""The PT2E flow: the annotator registry and its quantizer (``annotation``), quantizers
derived from an FX backend's config (``derived``), export (``export``), and the weight
range plans of exported graphs (``ranges``, ``range_plan``, ``range_graph``)."""
