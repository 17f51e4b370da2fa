"""The CLI's own warnings, as a new user meets them (issue 33): with `--log-format json` every
line on stderr is JSON (the unknown-queue warning, start-up errors), and `queues pause` warns of
a queue the app's tasks do not use, as `worker -q` does."""

from __future__ import annotations

import json

from tests.cli.test_cli_database import akadze, unmigrated
from tests.support import fetch

__all__ = ["unmigrated"]  # the fixture, used by name


def test_with_log_format_json_every_stderr_line_is_json(unmigrated: str) -> None:
    done = akadze(
        "worker", "tests.apps.basic:app", "-q", "mial", "--log-format", "json", "--burst", url=unmigrated
    )
    assert done.returncode == 2, done.stderr
    lines = [json.loads(line) for line in done.stderr.strip().splitlines()]
    assert [(line["level"], line["logger"]) for line in lines] == [
        ("WARNING", "akadze.cli"),
        ("ERROR", "akadze.cli"),
    ]
    assert lines[0]["message"] == (
        "no task of the app uses queue(s) 'mial' (the app's tasks use: default); serving them anyway"
    )
    assert lines[1]["message"].startswith("the database schema is at version 0 and this akadze needs")
    assert lines[1]["message"].endswith("run `akadze db migrate tests.apps.basic:app`")


def test_a_bad_log_level_in_json_is_a_json_line() -> None:
    done = akadze("worker", "tests.apps.basic:app", "--log-format", "json", "--log-level", "LOUD", url=None)
    assert done.returncode == 2
    [line] = [json.loads(line) for line in done.stderr.strip().splitlines()]
    assert line["message"] == "--log-level 'LOUD' is not a logging level (DEBUG, INFO, WARNING, ERROR)"


async def test_queues_pause_warns_of_a_queue_the_apps_tasks_do_not_use(database_url: str) -> None:
    typo = akadze("queues", "pause", "defualt", "--app", "tests.apps.basic:app", url=database_url)
    assert typo.returncode == 0, typo.stderr
    assert typo.stderr.splitlines() == [
        "warning: no task of the app uses queue 'defualt' (the app's tasks use: default); pausing it anyway"
    ]
    assert typo.stdout.splitlines() == ["queue 'defualt' paused"]
    known = akadze("queues", "pause", "default", "--app", "tests.apps.basic:app", url=database_url)
    assert (known.returncode, known.stderr) == (0, "")
    paused = await fetch(database_url, "SELECT queue FROM akadze_queue_pauses ORDER BY queue")
    assert [row["queue"] for row in paused] == ["default", "defualt"]
    bare = akadze("queues", "resume", "defualt", "--database-url", database_url, url=None)
    assert (bare.returncode, bare.stderr) == (0, ""), "a bare URL knows no queues: nothing to warn of"


def test_a_usage_error_of_a_command_that_logs_json_is_a_json_line() -> None:
    from typer.testing import CliRunner

    from akadze.cli import app as cli

    for args, env in [
        (["worker", "tests.apps.bare:app", "--log-format", "json", "--slots", "x"], {}),
        (["worker", "tests.apps.bare:app", "--slots", "x"], {"AKADZE_LOG_FORMAT": "json"}),
    ]:
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 2
        [line] = [json.loads(line) for line in result.stderr.splitlines()]
        assert (line["level"], line["logger"]) == ("ERROR", "akadze.cli")
        assert line["message"].startswith("Invalid value for '--slots'")
    plain = CliRunner().invoke(cli, ["jobs", "list", "--limit", "x"], env={"AKADZE_LOG_FORMAT": "json"})
    assert plain.stderr.startswith("error: Invalid value for '--limit'"), "jobs list does not log"
