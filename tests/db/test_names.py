"""The names the SQL files spell and Python defines once: job states and NOTIFY channels."""

from __future__ import annotations

import importlib.resources
import re

import pytest

from akadze.db.sql import DONE_CHANNEL, JOBS_CHANNEL
from akadze.db.tables import LISTED_FAILURES
from akadze.job import FINISHED_STATES, JobState

SQL = importlib.resources.files("akadze.db") / "sql"
MIGRATIONS = importlib.resources.files("akadze.db") / "migrations"
FILES = sorted(
    [entry for entry in SQL.iterdir() if entry.name.endswith(".sql")]
    + [entry for entry in MIGRATIONS.iterdir() if entry.name.endswith(".sql")],
    key=lambda entry: entry.name,
)


def code(entry: object) -> str:
    text = entry.read_text(encoding="utf-8")  # type: ignore[attr-defined]
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


@pytest.mark.parametrize("entry", FILES, ids=lambda entry: entry.name)
def test_every_state_a_sql_file_names_is_a_job_state(entry: object) -> None:
    text = code(entry)
    named = re.findall(r"state\s*(?:=|<>|!=)\s*'(\w+)'", text)
    for listed in re.findall(r"state\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", text, flags=re.IGNORECASE):
        named += re.findall(r"'(\w+)'", listed)
    assert set(named) <= {state.value for state in JobState}


@pytest.mark.parametrize("entry", FILES, ids=lambda entry: entry.name)
def test_a_list_of_finished_states_is_finished_states(entry: object) -> None:
    """Every finished state, or the listing indexes' failures (migration 0009): no other part."""
    finished = {state.value for state in FINISHED_STATES}
    failures = {state.value for state in LISTED_FAILURES}
    for listed in re.findall(r"state\s+IN\s*\(([^)]*)\)", code(entry), flags=re.IGNORECASE):
        values = set(re.findall(r"'(\w+)'", listed))
        if values & finished and values <= finished:
            assert values in (finished, failures)


@pytest.mark.parametrize("entry", FILES, ids=lambda entry: entry.name)
def test_every_notify_uses_a_channel_named_in_db_sql(entry: object) -> None:
    for channel in re.findall(r"pg_notify\(\s*'(\w+)'", code(entry)):
        assert channel in (JOBS_CHANNEL, DONE_CHANNEL)


def test_the_schema_allows_exactly_the_job_states() -> None:
    initial = code(MIGRATIONS / "0001_initial.sql")
    (listed,) = re.findall(r"CHECK \(state IN \(([^)]*)\)\)", initial)
    assert re.findall(r"'(\w+)'", listed) == [state.value for state in JobState]
