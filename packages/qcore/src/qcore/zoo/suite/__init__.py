"""Helpers of this project's own test suite: fake plugin distributions (``fakes``), the FX
and PT2E flows over the zoo's models (``flow``, ``pt2e``, ``derived``), the distributed
world (``world``). A plugin may reuse them, with no stability promise."""
