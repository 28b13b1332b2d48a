"""What qcore-torch's wheel ships beside the ``qcore`` package.

The unrelated PyPI library ``qcore`` installs into the same ``site-packages/qcore/``.
Installed over qcore-torch it replaces ``qcore/__init__.py``, and its ``__init__`` imports
a ``qcore.testing`` that is now ours: every ``import qcore...`` then dies on an ImportError
before any of our code runs. The command's entry point and the names it needs live here,
where that failure cannot reach them, so the command can say what happened and how to
repair it.
"""
