"""How a command is told its app: APP (where there is no other positional), --app, AKADZE_APP.

Every command that uses an app or its database takes all three; a command whose positional is
something else (a job id) refuses a second positional and says to use --app.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

import akadze
from akadze.cli import app as cli

MISSING = "tests.apps.does_not_exist:app"

#: (command, its other arguments): the commands that use an app or its database
TAKE_APP_POSITIONALLY: dict[str, tuple[str, ...]] = {
    "worker": ("worker",),
    "db migrate": ("db", "migrate"),
    "jobs list": ("jobs", "list"),
    "schedules list": ("schedules", "list"),
    "codegen": ("codegen",),
    "codegen generate": ("codegen", "generate"),
    "codegen diff": ("codegen", "diff"),
}
TAKE_APP_BY_OPTION_ONLY: dict[str, tuple[str, ...]] = {
    "jobs show": ("jobs", "show", "1"),
    "jobs cancel": ("jobs", "cancel", "1"),
    "jobs requeue": ("jobs", "requeue", "1"),
}
#: what a command needs beyond the app to get as far as loading it
TAIL: dict[str, tuple[str, ...]] = {
    "codegen": ("--out", "clients"),
    "codegen generate": ("--out", "clients"),
    "codegen diff": ("--against", "tests/codegen/golden/wire"),
}


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    base = {"AKADZE_DATABASE_URL": "", "AKADZE_APP": ""}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})})


def assert_one_line(result: Result, code: int, *words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("form", ["positional", "option", "environment"])
@pytest.mark.parametrize("command", sorted(TAKE_APP_POSITIONALLY))
def test_every_command_without_another_positional_takes_app_three_ways(command: str, form: str) -> None:
    words = TAKE_APP_POSITIONALLY[command]
    tail = TAIL.get(command, ())
    if form == "positional":
        result = run(*words, MISSING, *tail)
    elif form == "option":
        result = run(*words, "--app", MISSING, *tail)
    else:
        result = run(*words, *tail, env={"AKADZE_APP": MISSING})
    # the app was looked for: its module is named, whichever way it was given
    assert_one_line(result, 2, "cannot import", "tests.apps.does_not_exist")


@pytest.mark.parametrize("form", ["option", "environment"])
@pytest.mark.parametrize("command", sorted(TAKE_APP_BY_OPTION_ONLY))
def test_commands_with_an_id_take_app_by_option_or_environment(command: str, form: str) -> None:
    words = TAKE_APP_BY_OPTION_ONLY[command]
    if form == "option":
        result = run(*words, "--app", MISSING)
    else:
        result = run(*words, env={"AKADZE_APP": MISSING})
    assert_one_line(result, 2, "cannot import", "tests.apps.does_not_exist")


@pytest.mark.parametrize("command", sorted(TAKE_APP_BY_OPTION_ONLY))
def test_app_as_a_second_positional_is_refused_saying_which_form_to_use(command: str) -> None:
    result = run(*TAKE_APP_BY_OPTION_ONLY[command], MISSING)
    assert_one_line(result, 2, repr(MISSING), "--app module:attr", "AKADZE_APP")


def test_two_different_apps_are_refused() -> None:
    result = run("jobs", "list", "tests.apps.basic:app", "--app", "tests.apps.schedule_app:app")
    assert_one_line(result, 2, "named twice")


def test_the_command_line_beats_the_environment(database_url: str) -> None:
    """An app named on the command line is the one used, whatever AKADZE_DATABASE_URL says."""
    result = run(
        "jobs",
        "list",
        MISSING,
        env={"AKADZE_DATABASE_URL": database_url},
    )
    assert_one_line(result, 2, "tests.apps.does_not_exist")


def test_db_migrate_and_jobs_list_take_the_app_positionally(database_url: str) -> None:
    env = {"BASIC_APP_DATABASE_URL": database_url}
    migrated = run("db", "migrate", "tests.apps.basic:from_environment", env=env)
    assert migrated.exit_code == 0, migrated.output
    assert migrated.stdout.strip() == "schema is up to date"
    listed = run("jobs", "list", "tests.apps.basic:from_environment", env=env)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.split() == ["ID", "TASK", "QUEUE", "STATE", "ATTEMPT", "RUN", "AT", "FINISHED", "AT"]


# -- worker queues ------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_queue_name_is_refused(blank: str) -> None:
    assert_one_line(run("worker", "tests.apps.basic:app", "-q", blank), 2, "-q needs a queue name")


def test_a_queue_no_task_uses_is_named_with_the_apps_queues(database_url: str) -> None:
    result = run(
        "worker",
        "tests.apps.basic:from_environment",
        "-q",
        "nosuchqueue",
        "-q",
        "default",
        "--burst",
        env={"BASIC_APP_DATABASE_URL": database_url},
    )
    assert result.exit_code == 0, result.output
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "'nosuchqueue'" in warning and "'default'" not in warning
    assert "the app's tasks use: default" in warning


# -- version ------------------------------------------------------------------------------------


def test_version_prints_the_installed_version() -> None:
    result = run("--version")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"akadze {akadze.__version__}\n"


# -- the contract, for every command registered now or later ---------------------------------

#: commands that use neither an app nor its database: they print or write akadze's own schema
#: (db sql, db revision), run the embedded server, or check stubs against the workers' database
#: from the producer's side, where the worker's code is not installed (codegen verify)
NO_APP = {"db sql", "db revision", "db start", "db stop", "db url", "codegen verify"}


def leaf_commands() -> dict[str, Any]:
    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    return dict(walk(typer.main.get_command(cli), []))


def test_the_contract_walk_sees_every_group() -> None:
    assert {"worker", "db migrate", "jobs show", "schedules list", "codegen diff"} <= set(leaf_commands())


@pytest.mark.parametrize("name", sorted(set(leaf_commands()) - NO_APP))
def test_every_command_takes_app_as_option_and_positionally_when_it_has_no_other(name: str) -> None:
    command = leaf_commands()[name]
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    assert "--app" in options, f"akadze {name}: take `target: Target = DATABASE` (akadze/cli/options.py)"
    positionals = [p for p in command.params if p.param_type_name == "argument" and not p.hidden]
    if not [p for p in positionals if p.name != "app_path"]:
        assert [p.name for p in positionals] == ["app_path"], (
            f"akadze {name} has no other positional: take a `target: Target` whose set has APP "
            "(DATABASE, READ, APP_ONLY; akadze/cli/options.py)"
        )
