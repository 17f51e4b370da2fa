"""Shared fixtures of the codegen tests."""

from __future__ import annotations

import pytest

from tests.codegen.checkers import CODEGEN_TARGETS, run_mypy


@pytest.fixture(scope="session")
def mypy_output() -> str:
    """One ``mypy --strict`` run over every golden package and the typing fixtures."""
    return run_mypy(*CODEGEN_TARGETS)
