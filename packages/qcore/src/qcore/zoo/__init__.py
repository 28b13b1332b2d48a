"""Models for this project's own tests, benchmarks and guides, and (``suite``) the suite's
helpers. Not the conformance kit (that is :mod:`qcore.testing`); no stability promise."""
