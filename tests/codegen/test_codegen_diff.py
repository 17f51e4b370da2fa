"""``akadze codegen diff`` (hard case 41): every rule of the design's §5.8 rule 4, one case each,
with its verdict for producers already deployed and the deploy order; exit codes 0/1/2 and
--allow-breaking; the old side from a file, a package directory or ``GIT_REF:path``."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from akadze import Akadze
from akadze.cli import app as cli_app
from akadze_codegen.diff import Change, advice, diff, parse_manifest
from akadze_codegen.discover import build_manifest
from akadze_codegen.signature import Manifest, encode_manifest
from tests.codegen.checkers import ROOT

# -- worker types, old (V1) and new (V2) ---------------------------------------------------------


class Color1(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Color2(enum.StrEnum):
    RED = "red"
    BLUE = "blue"
    GREEN = "green"


class Address1(BaseModel):
    street: str
    zip: str | None = None


class Address2(BaseModel):
    """Renamed in Python, same on the wire: no change."""

    street: str
    zip: str | None = None


class AddressAliased(BaseModel):
    street: str = Field(alias="streetName")
    zip: str | None = None


class AddressZipRequired(BaseModel):
    street: str
    zip: str | None


class AddressWithCity(BaseModel):
    street: str
    zip: str | None = None
    city: str = "Paris"


# -- helpers -------------------------------------------------------------------------------------

Task = tuple[str, Callable[..., Any], dict[str, Any]]


def manifest(*tasks: Task) -> Manifest:
    """The manifest discovery builds for an app with these tasks (in this process)."""
    app = Akadze(database_url="postgresql://localhost/never-connected")
    for name, fn, options in tasks:
        app.register(fn, name=name, **options)
    return build_manifest(app, "tests:app")


def task(fn: Callable[..., Any], name: str = "orders.ship", **options: Any) -> Task:
    return (name, fn, options)


def changes(old: Task | list[Task], new: Task | list[Task]) -> list[tuple[str, str, str, str]]:
    before = old if isinstance(old, list) else [old]
    after = new if isinstance(new, list) else [new]
    return [(c.verdict, c.where, c.what, c.order) for c in diff(manifest(*before), manifest(*after))]


async def ship_int(order_id: int) -> None: ...


async def ship_str(order_id: str) -> None: ...


async def ship_optional_int(order_id: int | None) -> None: ...


async def ship_int_default(order_id: int = 0) -> None: ...


async def ship_with_express(order_id: int, express: bool) -> None: ...


async def ship_with_optional_express(order_id: int, express: bool = False) -> None: ...


async def ship_color1(color: Color1) -> None: ...


async def ship_color2(color: Color2) -> None: ...


async def ship_mode_ab(mode: Literal["a", "b"]) -> None: ...


async def ship_mode_abc(mode: Literal["a", "b", "c"]) -> None: ...


async def ship_to1(to: Address1) -> None: ...


async def ship_to2(to: Address2) -> None: ...


async def ship_to_aliased(to: AddressAliased) -> None: ...


async def ship_to_zip_required(to: AddressZipRequired) -> None: ...


async def ship_to_with_city(to: AddressWithCity) -> None: ...


# -- breaking for producers already deployed ------------------------------------------------------


def test_a_removed_task_is_breaking_and_ships_producers_first() -> None:
    old = [task(ship_int), task(ship_str, "orders.cancel")]
    assert changes(old, task(ship_int)) == [("breaking", "orders.cancel", "task removed", "producers first")]


def test_a_renamed_task_is_breaking_and_ships_in_steps() -> None:
    found = changes(task(ship_int), task(ship_int, "orders.dispatch"))
    assert found == [("breaking", "orders.ship", "task renamed to 'orders.dispatch'", "in steps")]


def test_a_changed_queue_is_breaking() -> None:
    found = changes(task(ship_int, queue="orders"), task(ship_int, queue="shipping"))
    assert found == [("breaking", "orders.ship", "queue changed: 'orders' -> 'shipping'", "in steps")]


def test_a_new_required_parameter_is_breaking_both_ways() -> None:
    found = changes(task(ship_int), task(ship_with_express))
    assert found == [("breaking", "orders.ship(express)", "new required parameter (bool)", "in steps")]


def test_a_removed_parameter_is_breaking() -> None:
    found = changes(task(ship_with_optional_express), task(ship_int))
    what = "parameter removed (old producers still send it)"
    assert found == [("breaking", "orders.ship(express)", what, "producers first")]
    # a removed *required* parameter: new producers would not send what the old worker needs
    assert changes(task(ship_with_express), task(ship_int))[0][3] == "in steps"


def test_a_changed_type_is_breaking() -> None:
    found = changes(task(ship_int), task(ship_str))
    assert found == [("breaking", "orders.ship(order_id)", "type changed: int -> str", "in steps")]


def test_a_narrowed_type_is_breaking_and_ships_producers_first() -> None:
    found = changes(task(ship_optional_int), task(ship_int))
    what = "type narrowed: None no longer accepted (int | None -> int)"
    assert found == [("breaking", "orders.ship(order_id)", what, "producers first")]


def test_a_removed_enum_member_is_breaking() -> None:
    found = changes(task(ship_color2), task(ship_color1))
    what = "enum value removed: Color2.GREEN = 'green'"
    assert found == [("breaking", "orders.ship(color)", what, "producers first")]


def test_a_removed_literal_value_is_breaking() -> None:
    found = changes(task(ship_mode_abc), task(ship_mode_ab))
    assert found == [("breaking", "orders.ship(mode)", "literal value removed: 'c'", "producers first")]


def test_a_changed_wire_name_is_breaking() -> None:
    found = changes(task(ship_to1), task(ship_to_aliased))
    what = "wire name changed: 'street' -> 'streetName'"
    assert found == [("breaking", "orders.ship(to.street)", what, "in steps")]


def test_a_struct_field_that_became_required_is_breaking() -> None:
    found = changes(task(ship_to1), task(ship_to_zip_required))
    assert found == [("breaking", "orders.ship(to.zip)", "field became required", "producers first")]


# -- safe ------------------------------------------------------------------------------------------


def test_a_new_optional_parameter_is_safe_worker_first() -> None:
    found = changes(task(ship_int), task(ship_with_optional_express))
    assert found == [("safe", "orders.ship(express)", "new optional parameter (bool)", "worker first")]


def test_a_new_optional_field_is_safe_worker_first() -> None:
    found = changes(task(ship_to1), task(ship_to_with_city))
    assert found == [("safe", "orders.ship(to.city)", "new optional field (str)", "worker first")]


def test_an_added_enum_member_is_safe() -> None:
    found = changes(task(ship_color1), task(ship_color2))
    assert found == [
        ("safe", "orders.ship(color)", "enum value added: Color2.GREEN = 'green'", "worker first")
    ]


def test_an_added_literal_value_is_safe() -> None:
    found = changes(task(ship_mode_ab), task(ship_mode_abc))
    assert found == [("safe", "orders.ship(mode)", "literal value added: 'c'", "worker first")]


def test_required_to_optional_is_safe() -> None:
    found = changes(task(ship_int), task(ship_int_default))
    assert found == [("safe", "orders.ship(order_id)", "parameter became optional", "worker first")]


def test_a_widened_union_is_safe() -> None:
    found = changes(task(ship_int), task(ship_optional_int))
    assert found == [
        ("safe", "orders.ship(order_id)", "union widened: now also accepts None", "worker first")
    ]


def test_a_new_task_is_safe() -> None:
    found = changes(task(ship_int), [task(ship_int), task(ship_str, "orders.cancel")])
    assert found == [("safe", "orders.cancel", "new task (queue 'default')", "worker first")]


def test_what_producers_cannot_see_is_no_change() -> None:
    """A mirror renamed in Python (Address1 -> Address2) is the same wire shape."""
    assert changes(task(ship_to1), task(ship_to2)) == []
    assert changes(task(ship_int, max_attempts=3), task(ship_int, max_attempts=3)) == []


# -- advice ----------------------------------------------------------------------------------------


def test_the_advice_follows_the_orders() -> None:
    worker_first = Change("safe", "t(x)", "new optional parameter (int)", "worker first")
    producers_first = Change("breaking", "t", "task removed", "producers first")
    in_steps = Change("breaking", "t", "queue changed", "in steps")
    assert advice([]).startswith("No changes")
    assert "deploy the worker first" in advice([worker_first])
    assert "deploy every producer first" in advice([producers_first])
    assert "in steps" in advice([in_steps])
    # one change that needs the worker first and one that needs the producers first: steps
    assert "in steps" in advice([worker_first, producers_first])


# -- the command: inputs and exit codes ------------------------------------------------------------


def write(path: Path, *tasks: Task) -> str:
    path.write_bytes(encode_manifest(manifest(*tasks)))
    return str(path)


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, ["codegen", "diff", *args])
    return result.exit_code, result.stdout, result.stderr


def test_exit_0_when_nothing_breaks(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", task(ship_int))
    new = write(tmp_path / "new.json", task(ship_with_optional_express))
    code, out, _ = cli("--against", old, "--manifest", new)
    assert code == 0
    assert "safe     orders.ship(express)  new optional parameter (bool)  [worker first]" in out
    assert "deploy the worker first" in out
    code, out, _ = cli("--against", old, "--manifest", old)
    assert (code, out) == (0, "No changes: producers built against the old manifest are current.\n")


def test_exit_1_on_a_breaking_change_unless_allowed(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", task(ship_int))
    new = write(tmp_path / "new.json", task(ship_str))
    code, out, err = cli("--against", old, "--manifest", new)
    assert code == 1
    assert "BREAKING orders.ship(order_id)  type changed: int -> str  [in steps]" in out
    assert "1 breaking, 0 safe changes" in out
    assert "--allow-breaking" in err
    code, out, _ = cli("--against", old, "--manifest", new, "--allow-breaking")
    assert code == 0 and "type changed: int -> str" in out


def test_a_package_directory_is_read_through_its_manifest(tmp_path: Path) -> None:
    (tmp_path / "clients").mkdir()
    write(tmp_path / "clients" / "_manifest.json", task(ship_int))
    new = write(tmp_path / "new.json", task(ship_str))
    assert cli("--against", str(tmp_path / "clients"), "--manifest", new)[0] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"tasks": []}', 'not an akadze codegen manifest (no "format" key)'),
        ('{"format": 99, "tasks": []}', "manifest format 99 is not supported (this akadze reads format 1)"),
        ('{"format": 1, "tasks": 5}', "not a valid manifest"),
    ],
    ids=["missing", "bad-json", "no-format", "unknown-format", "bad-shape"],
)
def test_exit_2_with_one_line_on_a_bad_manifest(tmp_path: Path, content: str | None, message: str) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = write(tmp_path / "good.json", task(ship_int))
    code, out, err = cli("--against", str(bad), "--manifest", good)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {bad}: ") and message in err
    assert err.count("\n") == 1
    # the new side too
    assert cli("--against", good, "--manifest", str(bad))[0] == 2


def test_exit_2_on_usage_errors(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", task(ship_int))
    code, _, err = cli("--manifest", good)
    assert code == 2 and "--against" in err
    code, _, err = cli("--against", good)
    assert code == 2 and "APP" in err
    code, _, err = cli("--against", good, "some.app:app", "--manifest", good)
    assert code == 2 and "not both" in err


def test_against_a_git_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "clients").mkdir()
    write(tmp_path / "clients" / "_manifest.json", task(ship_with_optional_express))
    git("add", "clients/_manifest.json")
    git("commit", "-q", "-m", "v1")
    write(tmp_path / "clients" / "_manifest.json", task(ship_int))  # the working tree moves on
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("--against", "HEAD:clients/_manifest.json", "--manifest", "clients")
    assert code == 1 and "orders.ship(express)  parameter removed" in out
    assert cli("--against", "HEAD:clients", "--manifest", "clients")[0] == 1  # a package directory
    code, _, err = cli("--against", "HEAD:nowhere.json", "--manifest", "clients")
    assert code == 2 and err.startswith("error: HEAD:nowhere.json: git show failed: ")


APP_V2 = """
from akadze import Akadze

app = Akadze(database_url="postgresql://localhost/never-connected")


@app.task("orders.ship", queue="orders")
async def ship(order_id: int, express: bool) -> None:
    return None
"""


def test_the_new_side_discovered_from_an_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through the command line: the app is imported in a discovery subprocess."""
    (tmp_path / "cg_diff_app.py").write_text(textwrap.dedent(APP_V2))
    old = write(tmp_path / "old.json", task(ship_int, queue="orders"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "akadze.cli", "codegen", "diff", "cg_diff_app:app", "--against", old],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "BREAKING orders.ship(express)  new required parameter (bool)  [in steps]" in done.stdout
    assert "no single order is safe" in done.stdout


def test_the_manifest_text_round_trips() -> None:
    m = manifest(task(ship_to1))
    assert parse_manifest(encode_manifest(m), "x") == m
    assert json.loads(encode_manifest(m))["format"] == 1


# -- a default-only change (issue 18.9): --check and diff agree -----------------------------------


async def ship_int_default_five(order_id: int = 5) -> None: ...


class AddressWithCityLyon(BaseModel):
    street: str
    zip: str | None = None
    city: str = "Lyon"


async def ship_to_with_city_lyon(to: AddressWithCityLyon) -> None: ...


def test_a_changed_default_is_a_safe_change_in_any_order() -> None:
    """Producers omit a defaulted value, so the change is theirs to ignore, but the generated
    comment changes: diff says so, as --check reports the package stale."""
    assert changes(task(ship_int_default), task(ship_int_default_five)) == [
        (
            "safe",
            "orders.ship(order_id)",
            "worker default changed: 0 -> 5 (clients omit it; regenerate for the comment)",
            "any order",
        )
    ]
    assert changes(task(ship_to_with_city), task(ship_to_with_city_lyon)) == [
        (
            "safe",
            "orders.ship(to.city)",
            "worker default changed: 'Paris' -> 'Lyon' (clients omit it; regenerate for the comment)",
            "any order",
        )
    ]


def test_check_and_diff_agree_on_a_default_only_change(tmp_path: Path) -> None:
    from akadze_codegen.emit import render
    from akadze_codegen.write import compare, write

    old, new = manifest(task(ship_int_default)), manifest(task(ship_int_default_five))
    write(tmp_path / "clients", render(old))
    stale = compare(tmp_path / "clients", render(new))
    assert stale and {m.reason for m in stale} == {"stale"}
    assert any("# worker default: 5" in m.diff for m in stale)
    assert [c.what for c in diff(old, new)] == [
        "worker default changed: 0 -> 5 (clients omit it; regenerate for the comment)"
    ]
    assert old.tasks[0].args_fp == new.tasks[0].args_fp  # the wire did not change


def test_a_changed_return_type_is_breaking_for_producers_that_read_results() -> None:
    """Issue 31 point 1: the manifest records return types; diff and the fingerprint see them."""
    from akadze import Akadze
    from akadze_codegen.diff import diff as diff_manifests
    from akadze_codegen.discover import build_manifest

    def manifest(returns: type) -> Any:
        app = Akadze(database_url="postgresql://localhost/unused")

        async def total(n: int) -> Any:
            return n

        total.__annotations__["return"] = returns
        app.register(total, name="stats.total")
        return build_manifest(app, "tests:app")

    old, narrowed, changed = manifest(int | None), manifest(int), manifest(str)
    assert old.tasks[0].result_fp != changed.tasks[0].result_fp
    assert old.tasks[0].args_fp == changed.tasks[0].args_fp  # jobs are not drift for it
    (breaking,) = diff_manifests(old, changed)
    assert breaking.verdict == "breaking" and breaking.where == "stats.total -> result"
    (safe,) = diff_manifests(old, narrowed)
    assert safe.verdict == "safe"
