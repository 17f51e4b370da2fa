"""Typed chaining to another module's task, and the types of wait_for, get_job and
cancel_requested, as mypy sees them (issue 17, points 5 and 6)."""

from __future__ import annotations

import pytest

from tests.codegen.checkers import lines_for, run_mypy

FIXTURE = "tests/typing/chain_through_client.py"


@pytest.fixture(scope="module")
def output() -> list[str]:
    return lines_for(run_mypy(FIXTURE), FIXTURE)


def test_the_generated_client_in_complete_tx_is_typed(output: list[str]) -> None:
    notes = [line.split("Revealed type is ", 1)[1] for line in output if "Revealed type" in line]
    assert notes == [
        '"sqlalchemy.ext.asyncio.engine.AsyncConnection"',
        '"akadze.job.Job"',
        '"akadze.job.Job | None"',
        '"akadze.job.JobState"',
        '"akadze.job.Job"',
        '"bool"',
    ]


def test_a_misspelled_or_mistyped_argument_is_a_mypy_error(output: list[str]) -> None:
    errors = [line for line in output if " error: " in line]
    assert any('Unexpected keyword argument "order"' in line for line in errors), errors
    assert any('"order_id"' in line and "incompatible type" in line for line in errors), errors
    # the two errors above and nothing else: get_task's handle lets the misspelling through
    assert len(errors) == 2, errors
