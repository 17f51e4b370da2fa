"""Every public exception is defined in akadze/errors.py and drawn in its tree; the modules
users met them in first still export them; codegen's errors share one base."""

from __future__ import annotations

import ast
import dataclasses
import re
import string

import pytest

import akadze.client
import akadze.codec.drift
import akadze.embedded
from akadze import errors
from akadze_codegen import diff, problems
from tests.support import ROOT

#: exception classes defined outside errors.py on purpose: never raised to a user's code
INTERNAL = {
    "akadze/outcomes.py:Outcome": "the base of Retry/Snooze/Fail/Cancel, kept apart from AkadzeError",
    "akadze/worker/executor.py:RunTimeout": "recorded on the job row; never raised to a caller",
    "akadze/worker/rescuer.py:WorkerLost": "recorded on the job row; never raised to a caller",
    "akadze/cli/common.py:Exit": "the command line's exit code and line",
    "akadze/web/pages.py:BadRequest": "turned into a 400 page by the dashboard",
    "akadze/web/actions.py:Refused": "turned into a 403 page by the dashboard",
}

BUILTIN_BASES = {"Exception", "ValueError", "TypeError", "RuntimeError", "LookupError", "TimeoutError"}


def exception_classes(package: str) -> dict[str, list[str]]:
    """ "path:Class" -> its base names, for every class of ``package`` that derives from an
    exception (directly from a builtin one, or from one found here)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                found[f"{path.relative_to(ROOT)}:{node.name}"] = bases
    names = {key.partition(":")[2] for key in found}
    errors_like = set(BUILTIN_BASES)
    changed = True
    while changed:  # a class is an exception if one of its bases is
        changed = False
        for key, bases in found.items():
            name = key.partition(":")[2]
            if name not in errors_like and any(b in errors_like for b in bases):
                errors_like.add(name)
                changed = True
    return {key: bases for key, bases in found.items() if key.partition(":")[2] in errors_like & names}


def test_every_public_exception_of_akadze_is_defined_in_errors_py() -> None:
    internal = {key.partition(":")[2] for key in INTERNAL}
    outside = sorted(
        key
        for key, bases in exception_classes("akadze").items()
        # an outcome (Retry, Snooze, ...) belongs to its own family, apart from AkadzeError
        if not key.startswith("akadze/errors.py:") and key not in INTERNAL and not internal & set(bases)
    )
    assert outside == [], f"define these in akadze/errors.py (or list them in INTERNAL, with why): {outside}"


def test_the_tree_in_the_docstring_draws_every_class_and_no_other() -> None:
    doc = errors.__doc__ or ""
    drawn = set(re.findall(r"[├└]── (\w+)", doc.split("akadze_codegen.problems")[0]))
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and name != "AkadzeError"
    }
    assert drawn == defined


def test_the_old_import_paths_still_work() -> None:
    assert akadze.codec.drift.ArgsSchemaMismatch is errors.ArgsSchemaMismatch
    assert akadze.client.InvalidArgsError is errors.InvalidArgsError
    assert akadze.embedded.EmbeddedPostgresError is errors.EmbeddedPostgresError
    for error, builtin in (
        (errors.ArgsSchemaMismatch, ValueError),
        (errors.InvalidArgsError, ValueError),
        (errors.EmbeddedPostgresError, RuntimeError),
    ):
        assert issubclass(error, errors.AkadzeError) and issubclass(error, builtin)


def test_codegen_errors_share_one_base() -> None:
    assert issubclass(problems.CodegenError, problems.AkadzeCodegenError)
    assert issubclass(diff.ManifestInputError, problems.AkadzeCodegenError)
    bases = {key: value for key, value in exception_classes("akadze_codegen").items()}
    assert sorted(bases) == [
        "akadze_codegen/diff.py:ManifestInputError",
        "akadze_codegen/problems.py:AkadzeCodegenError",
        "akadze_codegen/problems.py:CodegenError",
    ]


def _library_errors() -> list[type[errors.AkadzeError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, errors.AkadzeError)
        and value is not errors.AkadzeError
    ]


@pytest.mark.parametrize("error", _library_errors(), ids=lambda error: error.__name__)
def test_every_template_names_only_the_fields_of_its_error(error: type[errors.AkadzeError]) -> None:
    named = {field for _, field, _, _ in string.Formatter().parse(error.template) if field}
    fields = {f.name for f in dataclasses.fields(error)} if dataclasses.is_dataclass(error) else set()
    assert named <= fields, f"{error.__name__}.template names {sorted(named - fields)}"


def test_an_error_carries_its_values_and_says_them() -> None:
    error = errors.ArgsTooLargeError("mail.send", 2_000_000, 1_000_000)
    assert (error.task_name, error.size, error.limit) == ("mail.send", 2_000_000, 1_000_000)
    assert str(error).startswith("arguments of task 'mail.send' encode to 2000000 bytes")
    assert error.args == (str(error),)
    assert {error} == {error}  # hashable, by identity
    edited = errors.MigrationEditedError("0001_initial.sql", recorded="a" * 64, shipped="b" * 64)
    assert f"checksum {'a' * 12} but the shipped file has {'b' * 12}:" in str(edited)
    assert str(errors.ConfigError("bad port")) == "bad port"
