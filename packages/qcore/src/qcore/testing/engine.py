"""Kept for the kit's users: the context manager lives in :mod:`qcore.engine`."""

from qcore.engine import quantized_engine

__all__ = ["quantized_engine"]
