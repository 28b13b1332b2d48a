"""The root conftest pins every session to one thread (``conftest.one_thread``): in
process, and for the fresh interpreters tests start, whatever ``OMP_NUM_THREADS`` the
session was started with (plain ``pytest`` on a two-core machine runs two)."""

from __future__ import annotations

import os

import torch

from qcore.testing.fresh import run_fresh


def test_this_session_and_its_fresh_interpreters_run_one_thread() -> None:
    assert torch.get_num_threads() == 1
    assert os.environ["OMP_NUM_THREADS"] == "1"
    # (OpenMP reads it at start: the variable is what the child's torch will use)
    outcome = run_fresh("import os, qcore.testing.fresh as f; f.emit(os.environ['OMP_NUM_THREADS'])")
    assert outcome.ok and outcome.result() == "1", outcome.describe()
