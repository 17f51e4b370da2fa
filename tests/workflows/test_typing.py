"""mypy rejects a wrong argument to ``bind`` (issue 29, point 1): on a registered task, through
``using(...)``, and on a generated client's task; ``Workflow.enqueue`` returns Jobs by step."""

from __future__ import annotations

import pytest

from tests.codegen.checkers import lines_for, run_mypy

FIXTURE = "tests/workflows/typing_bind.py"


@pytest.fixture(scope="module")
def output() -> list[str]:
    return lines_for(run_mypy(FIXTURE), FIXTURE)


def test_bind_returns_a_call_and_enqueue_the_jobs_by_step(output: list[str]) -> None:
    notes = [line.split("Revealed type is ", 1)[1] for line in output if "Revealed type" in line]
    assert notes == ['"akadze.workflow.Call"', '"akadze.workflow.Call"', '"dict[str, akadze.job.Job]"']


def test_a_wrong_argument_to_bind_is_a_mypy_error_naming_it(output: list[str]) -> None:
    errors = [line for line in output if " error: " in line]
    text = "\n".join(errors)
    assert 'Unexpected keyword argument "user_idd" for "bind" of "Task"' in text
    assert 'Argument "user_id" to "bind" of "Task" has incompatible type "str"; expected "int"' in text
    assert 'Unexpected keyword argument "subjectt" for "bind" of "Task"' in text
    assert 'Unexpected keyword argument "user_idd" for "bind" of "MailNotify"' in text
    assert 'Argument "user_id" to "bind" of "MailNotify" has incompatible type "str"; expected "int"' in text
    assert 'Argument "after_failure" to "add" of "Workflow" has incompatible type' in text
    # one error line per wrong call, none on the right ones
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [30, 32, 34, 36, 37, 39]
