"""qcore.testing.fresh: how a child interpreter ended, whichever way it did."""

from __future__ import annotations

import pytest

from qcore.testing.fresh import run_fresh


def test_an_exception_is_named_and_a_missing_result_says_how_the_child_ended() -> None:
    outcome = run_fresh("raise RuntimeError(\"Didn't find engine\")")
    assert not outcome.ok and outcome.signal is None
    assert outcome.raised("RuntimeError") and not outcome.raised("ValueError")
    with pytest.raises(AssertionError, match="exit status 1"):
        outcome.result()


def test_a_crash_is_a_signal_with_faulthandlers_stack() -> None:
    outcome = run_fresh("import os, signal, sys\ndef boom():\n    os.kill(os.getpid(), signal.SIGSEGV)\nboom()")
    assert outcome.signal == "SIGSEGV" and not outcome.raised("RuntimeError")
    assert "in boom" in outcome.stderr  # faulthandler names the frame that was running


def test_arguments_environment_and_threads_reach_the_child() -> None:
    source = "import os, sys, qcore.testing.fresh as f\nf.emit([sys.argv[1:], os.environ['Q'], os.environ['OMP_NUM_THREADS']])"
    outcome = run_fresh(source, args=["a", "b"], env={"Q": "x"}, threads=1)
    assert outcome.result() == [["a", "b"], "x", "1"]
