"""What a target CPU does to int8, and which weight ranges to choose for it.

oneDNN's int8 convolutions and matmuls are exact on CPUs with VNNI or AMX, and add
neighbouring products in a saturating 16-bit lane on the others (AVX2-only and pre-VNNI
AVX-512). Everything that depends on that fact lives here, and nothing else does:
:mod:`~qcore.int8.cpu_profile` names the target CPU (probed, or overridden for a build box),
:mod:`~qcore.int8.saturation` emulates its arithmetic and scores weight ranges,
:mod:`~qcore.int8.calibration` keeps the layer inputs those scores need, and the range
choice reaches each flow through :mod:`~qcore.int8.weight_ranges` (FX qconfig mappings),
:mod:`~qcore.fx.ranges` (FX-prepared models) and :mod:`~qcore.pt2e.ranges` (PT2E
quantizers). For a lowering that runs an op that can overflow on a doubled reduction,
:mod:`~qcore.int8.depth_plan` chooses per layer between narrowed weights, a 7-bit input and
that deeper kernel within a budget of multiply-adds, from :mod:`~qcore.int8.noise` (a layer's
output noise) and :mod:`~qcore.pt2e.range_graph` (what a layer costs), wired into PT2E
observers by :mod:`~qcore.pt2e.range_plan`. Importing this package imports nothing else.
:mod:`qcore.host` is the public spelling of :mod:`~qcore.int8.cpu_profile`.
"""
