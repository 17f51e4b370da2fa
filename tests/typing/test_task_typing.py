"""mypy checks ``task.enqueue`` and ``task.using(...).enqueue`` against the task's signature."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codegen.checkers import failing_lines, lines_for, run_mypy

FIXTURE = "tests/typing/task_enqueue.py"
SNAPSHOT = Path(__file__).with_name("task_enqueue.mypy.txt")


@pytest.fixture(scope="module")
def output() -> list[str]:
    return lines_for(run_mypy(FIXTURE), FIXTURE)


def test_enqueue_returns_a_job_and_using_keeps_the_signature(output: list[str]) -> None:
    notes = [line.split("Revealed type is ", 1)[1] for line in output if "Revealed type" in line]
    assert notes == [
        '"akadze.task.Task[[user_id: int, subject: str =], typing.Coroutine[Any, Any, str]]"',
        '"akadze.job.Job"',
        '"akadze.task.Task[[user_id: int, subject: str =], typing.Coroutine[Any, Any, str]]"',
        '"akadze.job.Job"',
        '"akadze.task.Task[[a: int, b: int], int]"',
    ]


def test_a_wrong_name_type_or_missing_argument_fails_naming_the_argument(output: list[str]) -> None:
    errors = "\n".join(line for line in output if " error: " in line)
    assert 'Unexpected keyword argument "user_idd" for "enqueue" of "Task"' in errors
    assert 'Argument "user_id" to "enqueue" of "Task" has incompatible type "str"; expected "int"' in errors
    assert 'Missing positional argument "user_id" in call to "enqueue" of "Task"' in errors
    assert 'Unexpected keyword argument "subjectt" for "enqueue" of "Task"' in errors
    assert 'Argument "b" to "enqueue" of "Task" has incompatible type "str"; expected "int"' in errors


def test_the_failing_lines_match_the_snapshot(output: list[str]) -> None:
    _, *expected = SNAPSHOT.read_text().splitlines()
    assert failing_lines(output) == failing_lines(expected), "regenerate: python -m tests.codegen.regen"
