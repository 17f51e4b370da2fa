"""The public surface is the fixed list of DESIGN.md, and the two error families stay apart."""

from __future__ import annotations

import inspect

import akadze
from akadze import errors, outcomes

#: DESIGN.md section 2, "these names are fixed"
DESIGN_NAMES = {
    "Akadze",
    "Task",
    "Job",
    "JobState",
    "Retry",
    "Snooze",
    "Fail",
    "Cancel",
    "ResultNotJson",
    "BackoffPolicy",
    "current",
    "request_cancel",
    "requeue",
    # DESIGN.md section 5, flow control
    "Unique",
    "Limit",
    # DESIGN.md section 6, typed results
    "JobFailedError",
    "JobCancelledError",
    # DESIGN.md section 6, workflows
    "Workflow",
    "cancel_workflow",
    "DependencyFailed",
}


def test_all_is_exactly_the_fixed_list_sorted() -> None:
    assert set(akadze.__all__) == DESIGN_NAMES
    assert len(akadze.__all__) == len(DESIGN_NAMES)
    assert akadze.__all__ == sorted(akadze.__all__)


def test_every_public_name_is_importable_from_the_package() -> None:
    for name in DESIGN_NAMES:
        assert getattr(akadze, name) is not None, name


def test_the_package_exports_nothing_else_but_its_version() -> None:
    """The names load on first use (akadze/__init__.py); dir() lists them before and after."""
    public = {
        name
        for name in dir(akadze)
        if not name.startswith("_") and not inspect.ismodule(getattr(akadze, name))
    }
    assert public == DESIGN_NAMES
    assert {name for name in vars(akadze) if not name.startswith("_")} - DESIGN_NAMES <= {
        name for name in vars(akadze) if inspect.ismodule(getattr(akadze, name))
    }


def test_a_misspelt_name_is_an_attribute_error() -> None:
    try:
        _ = akadze.Akdaze  # type: ignore[attr-defined]  # (the misspelling under test)
    except AttributeError as exc:
        assert "Akdaze" in str(exc)
    else:
        raise AssertionError("akadze.Akdaze resolved")


def test_the_package_has_a_version() -> None:
    assert isinstance(akadze.__version__, str)
    assert akadze.__version__


def test_job_states_are_the_five_lower_case_strings() -> None:
    assert [state.value for state in akadze.JobState] == [
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert akadze.JobState.QUEUED == "queued"


def test_outcomes_are_not_library_errors() -> None:
    for outcome in (akadze.Retry, akadze.Snooze, akadze.Fail, akadze.Cancel):
        assert issubclass(outcome, outcomes.Outcome)
        assert not issubclass(outcome, errors.AkadzeError)


def test_library_errors_inherit_the_builtin_a_caller_would_catch() -> None:
    expected = {
        errors.ConfigError: ValueError,
        errors.DuplicateTaskError: ValueError,
        errors.MissingRegisterError: ImportError,
        errors.UnknownTaskError: LookupError,
        errors.NotInRunError: RuntimeError,
        errors.ResultNotJson: TypeError,
        errors.ArgsTooLargeError: ValueError,
    }
    for error, builtin in expected.items():
        assert issubclass(error, errors.AkadzeError), error
        assert issubclass(error, builtin), error
    assert issubclass(errors.LostOwnershipError, errors.AkadzeError)
    assert akadze.ResultNotJson is errors.ResultNotJson
