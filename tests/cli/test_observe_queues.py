"""akadze queues list, as a table and as JSON, against a real database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from typer.testing import Result

from tests.cli.test_observe import Db, akadze, as_json, database_url, db, fp

__all__ = ["akadze", "database_url", "db"]  # fixtures


# -- queues list ------------------------------------------------------------------------------


def test_queues_list_counts_each_queue_as_json_and_as_a_table(db: Db, akadze: Callable[..., Result]) -> None:
    db.enqueue("mail.send", user_id=1)
    db.enqueue("mail.send", user_id=2)
    db.enqueue("mail.send", delay=timedelta(hours=1), user_id=3)
    db.sql("UPDATE akadze_jobs SET run_at = now() - interval '90 seconds' WHERE args ->> 'user_id' = '1'")
    db.sql("INSERT INTO akadze_queue_pauses (queue) VALUES ('idle')")
    db.worker("w1", ["mail", "other"], [("mail.send", "mail", fp(db, "mail.send"))])

    found = as_json(akadze("queues", "list", "--output", "json"))
    by_name = {q["name"]: q for q in found}
    assert set(by_name) == {"idle", "mail", "other"}
    mail = by_name["mail"]
    assert set(mail) == {
        "name",
        "paused",
        "ready",
        "delayed",
        "held",
        "running",
        "failed",
        "oldest_ready_s",
        "workers",
    }
    assert (mail["held"], mail["failed"]) == (0, 0)
    assert (mail["paused"], mail["ready"], mail["delayed"], mail["running"], mail["workers"]) == (
        False,
        2,
        1,
        0,
        1,
    )
    assert 89 < mail["oldest_ready_s"] < 200
    assert by_name["idle"]["paused"] is True and by_name["idle"]["oldest_ready_s"] is None
    assert by_name["other"]["workers"] == 1

    result = akadze("queues", "list")
    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == [
        "NAME",
        "PAUSED",
        "READY",
        "DELAYED",
        "HELD",
        "RUNNING",
        "FAILED",
        "OLDEST",
        "READY",
        "WORKERS",
    ]
    assert rows[2][:7] == ["mail", "no", "2", "1", "0", "0", "0"]


def test_queues_list_counts_the_failed_jobs_and_lists_a_queue_that_has_only_those(
    db: Db, akadze: Callable[..., Result]
) -> None:
    for user_id in (1, 2, 3):
        db.enqueue("mail.send", user_id=user_id)
    db.sql("UPDATE akadze_jobs SET state = 'failed', finished_at = now() WHERE args ->> 'user_id' <> '3'")
    db.sql("UPDATE akadze_jobs SET queue = 'gone' WHERE args ->> 'user_id' = '1'")
    db.sql(
        "UPDATE akadze_jobs SET state = 'cancelled', finished_at = now(), queue = 'quiet' "
        "WHERE args ->> 'user_id' = '3'"
    )

    by_name = {q["name"]: q for q in as_json(akadze("queues", "list", "-o", "json"))}
    assert set(by_name) == {"gone", "mail"}, (
        "a queue with only failed jobs is listed, one with only cancelled is not"
    )
    assert (by_name["gone"]["failed"], by_name["mail"]["failed"]) == (1, 1)
    assert by_name["mail"]["ready"] == 0
    rows = [line.split() for line in akadze("queues", "list").stdout.splitlines()]
    assert [row[:7] for row in rows[1:]] == [
        ["gone", "no", "0", "0", "0", "0", "1"],
        ["mail", "no", "0", "0", "0", "0", "1"],
    ]


def test_queues_list_counts_the_held_jobs_and_lists_a_queue_whose_jobs_are_all_held(
    db: Db, akadze: Callable[..., Result]
) -> None:
    """Jobs a Limit parked are queued but neither ready nor delayed: the queue is still listed
    (it said "no queues: no job" with 25 jobs waiting behind a limit), with its HELD count."""
    for user_id in (1, 2, 3):
        db.enqueue("mail.send", user_id=user_id)
    db.sql("UPDATE akadze_jobs SET parked = 'limit' WHERE args ->> 'user_id' <> '3'")
    db.sql("UPDATE akadze_jobs SET state = 'running' WHERE args ->> 'user_id' = '3'")

    [mail] = as_json(akadze("queues", "list", "-o", "json"))
    counts = (mail["name"], mail["ready"], mail["delayed"], mail["held"], mail["running"])
    assert counts == ("mail", 0, 0, 2, 1)
    db.sql("UPDATE akadze_jobs SET state = 'succeeded', finished_at = now() WHERE args ->> 'user_id' = '3'")
    rows = [line.split() for line in akadze("queues", "list").stdout.splitlines()]
    assert rows[1][:7] == ["mail", "no", "0", "0", "2", "0", "0"]


def test_queues_list_with_nothing_is_an_empty_array(akadze: Callable[..., Result]) -> None:
    assert as_json(akadze("queues", "list", "-o", "json")) == []
    result = akadze("queues", "list")
    assert result.exit_code == 0 and "no queues" in result.stdout
