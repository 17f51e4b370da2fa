"""Fault harness and scenarios (issue 8).

The short version of every scenario runs under pytest (``tests/faults/test_*.py``); the long
ones run with ``python -m tests.faults.chaos``. Both drive the same code in ``scenarios.py``
and judge the outcome with ``checker.py`` against the ledger in ``ledger.py``.
"""
