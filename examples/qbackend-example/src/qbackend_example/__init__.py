"""Example third-party qcore plugin. Importing it changes nothing."""

from qbackend_example._version import __version__

__all__ = ["__version__"]
