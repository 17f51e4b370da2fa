"""Generated clients type-check strictly, and wrong calls fail naming what is wrong.

The negative file is pinned against snapshots (mypy-protobuf's test_negative): one per checker,
regenerated with ``python -m tests.codegen.regen``.
"""

from __future__ import annotations

import pytest

from tests.codegen.checkers import (
    TYPECHECK,
    failing_lines,
    lines_for,
    pyright_available,
    run_pyright,
)

NEGATIVE = "tests/codegen/typecheck/negative_client.py"
POSITIVE = "tests/codegen/typecheck/positive_client.py"


def test_golden_packages_pass_mypy_strict_alone_and_when_imported(mypy_output: str) -> None:
    assert lines_for(mypy_output, "tests/codegen/golden") == []
    # imported: the positive file uses every package and has nothing but reveal_type notes
    assert [line for line in lines_for(mypy_output, POSITIVE) if " note: " not in line] == []


def test_the_example_producer_passes_mypy_strict(mypy_output: str) -> None:
    assert lines_for(mypy_output, "examples/producer") == []


def test_enqueue_returns_the_job_and_using_returns_the_same_task_class(mypy_output: str) -> None:
    revealed = [line.split("Revealed type is ")[1] for line in lines_for(mypy_output, POSITIVE)]
    assert revealed == [
        '"akadze.job.Job"',
        '"str"',  # result_of: the task's mirrored return type
        '"registration.mail.MailNotify"',
        '"list[akadze.job.Job]"',
    ]


def test_a_misspelled_a_wrong_typed_and_a_missing_argument_each_fail_naming_it(mypy_output: str) -> None:
    errors = "\n".join(line for line in lines_for(mypy_output, NEGATIVE) if " error: " in line)
    assert (
        'Unexpected keyword argument "user_idd" for "enqueue" of "MailNotify"; did you mean "user_id"?'
        in errors
    )
    assert (
        'Argument "user_id" to "enqueue" of "MailNotify" has incompatible type "str"; expected "int"'
        in errors
    )
    assert 'Missing named argument "user_id" for "enqueue" of "MailNotify"' in errors


def test_every_wrong_call_in_the_negative_file_is_an_error(mypy_output: str) -> None:
    source = (TYPECHECK / "negative_client.py").read_text().splitlines()
    failing = failing_lines(lines_for(mypy_output, NEGATIVE))
    # each "# <case>" comment starts a region (up to the next one) that must hold an error
    starts = [n for n, text in enumerate(source, start=1) if text.strip().startswith("# ")]
    regions = zip(starts, [*starts[1:], len(source) + 1], strict=True)
    missing = [start for start, end in regions if not any(start < f < end for f in failing)]
    assert missing == [], f"the calls after these comment lines type-check but must not: {missing}"


def test_the_mypy_diagnostics_match_the_snapshot(mypy_output: str) -> None:
    _, *expected = (TYPECHECK / "negative_client.mypy.txt").read_text().splitlines()
    actual = lines_for(mypy_output, NEGATIVE)
    assert failing_lines(actual) == failing_lines(expected), "regenerate: python -m tests.codegen.regen"


@pytest.fixture(scope="module")
def pyright_output() -> str:
    if not pyright_available():
        pytest.skip("pyright is not installed")
    return run_pyright("tests/codegen/golden", POSITIVE, NEGATIVE)


def test_golden_packages_and_positive_calls_pass_pyright_strict(pyright_output: str) -> None:
    errors = [line for line in pyright_output.splitlines() if " - error: " in line]
    assert [line for line in errors if not line.startswith(NEGATIVE)] == []


def test_the_pyright_diagnostics_match_the_snapshot(pyright_output: str) -> None:
    expected = (TYPECHECK / "negative_client.pyright.txt").read_text()
    actual = "".join(f"{line}\n" for line in lines_for(pyright_output, NEGATIVE))
    assert actual == expected, "regenerate with: python -m tests.codegen.regen"
