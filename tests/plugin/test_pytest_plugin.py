"""The pytest plugin (entry point ``akadze``), run for real: an inner pytest in a temporary
project, against the real PostgreSQL, with its fixtures and akadze.testing's assertions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

APP = """
import os
from datetime import timedelta

from akadze import Akadze, Retry, Snooze

# built at import time on the service's database, as services do; never reached in tests
app = Akadze(database_url=os.environ.get("MYAPP_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/nowhere"))


@app.task("mail.send", queue="mail")
async def send(user_id: int, template: str = "welcome") -> None: ...


@app.task("orders.place")
async def place(order_id: int) -> int:
    await send.enqueue(user_id=order_id, template="receipt")
    return order_id


@app.task("flaky", max_attempts=4)
async def flaky(n: int) -> str:
    from akadze import current

    if current().job.attempt < 3:
        raise RuntimeError("not yet")  # retried with a backoff of seconds
    return "ok"


@app.task("sleepy")
async def sleepy() -> str:
    from akadze import current

    if current().job.run < 3:
        raise Snooze(timedelta(hours=1))
    return "awake"


def make_app(database_url: str) -> Akadze:
    made = Akadze(database_url=database_url)

    @made.task("made.hello")
    async def hello(name: str) -> str:
        return f"hello {name}"

    return made
"""

INI = """
[pytest]
pythonpath = .
asyncio_mode = {mode}
asyncio_default_fixture_loop_scope = function
akadze_app = {app}
filterwarnings = error
"""


def project(tmp_path: Path, tests: str, *, app: str = "myapp:app", mode: str = "auto") -> Path:
    (tmp_path / "myapp.py").write_text(APP)
    (tmp_path / "pytest.ini").write_text(INI.format(app=app, mode=mode))
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(tests))
    return tmp_path


def inner(folder: Path, *args: str) -> tuple[dict[str, int], str]:
    """Run pytest in ``folder`` as a user would; returns the outcome counts and the output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MYAPP_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", output)}
    return counts, output


def test_each_test_gets_its_own_migrated_database_and_the_app_bound_to_it(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        from akadze.testing import assert_enqueued, assert_not_enqueued
        from myapp import place, send

        async def test_one(akadze_app, akadze_database_url, akadze_drain):
            from sqlalchemy.engine import make_url

            assert akadze_app.engine.url.database == make_url(akadze_database_url).database
            job = await place.enqueue(order_id=7)
            await assert_enqueued(akadze_app, place, order_id=7)
            await assert_not_enqueued(akadze_app, send)
            assert await akadze_drain() == 2
            [receipt] = await assert_enqueued(akadze_app, send, user_id=7, template="receipt")
            assert receipt.state == "succeeded"
            assert (await akadze_app.get_job(job.id)).result == 7

        async def test_two_starts_empty(akadze_app):
            await assert_not_enqueued(akadze_app, place)
            await assert_not_enqueued(akadze_app, "mail.send")
        """,
    )
    counts, output = inner(folder)
    assert counts == {"passed": 2}, output


def test_fixtures_work_in_strict_mode_and_with_an_app_factory(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        import pytest
        from akadze.testing import assert_enqueued

        @pytest.mark.asyncio
        async def test_factory(akadze_app, akadze_drain):
            hello = akadze_app.get_task("made.hello")
            await hello.enqueue(name="ada")
            await akadze_drain()
            [job] = await assert_enqueued(akadze_app, hello, name="ada")
            assert job.result == "hello ada"
        """,
        app="myapp:make_app",
        mode="strict",
    )
    counts, output = inner(folder)
    assert counts == {"passed": 1}, output


def test_drain_with_delayed_runs_retries_and_snoozes_at_once(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        import time
        from myapp import flaky, sleepy

        async def test_delayed(akadze_app, akadze_drain):
            a = await flaky.enqueue(n=1)
            b = await sleepy.enqueue()
            started = time.monotonic()
            assert await akadze_drain() == 2  # one run each; the rest waits for its run_at
            assert await akadze_drain(delayed=True) == 4
            assert time.monotonic() - started < 30
            assert (await akadze_app.get_job(a.id)).result == "ok"
            assert (await akadze_app.get_job(b.id)).result == "awake"
        """,
    )
    counts, output = inner(folder)
    assert counts == {"passed": 1}, output


def test_a_failed_assertion_says_what_was_enqueued_instead_without_values(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        from akadze.testing import assert_enqueued, assert_not_enqueued
        from myapp import place, send

        async def test_wrong_args(akadze_app):
            await send.enqueue(user_id=1, template="secret-" + str(1 * 1000 + 7))
            await send.enqueue(user_id=2, template="secret-" + str(2 * 1000 + 7))
            await place.enqueue(order_id=3)
            await assert_enqueued(akadze_app, send, user_id=3)

        async def test_not_expected(akadze_app):
            await send.enqueue(user_id=5, template="secret-" + str(5 * 1000 + 7))
            await assert_not_enqueued(akadze_app, send, user_id=5)
        """,
    )
    counts, output = inner(folder)
    assert counts == {"failed": 2}, output
    assert "expected a job of 'mail.send' with arguments user_id" in output
    assert "Enqueued instead: mail.send x2, orders.place x1" in output
    assert "with arguments template, user_id (values hidden: --akadze-show-args)" in output
    assert "expected no job of 'mail.send'" in output
    assert not re.search(r"secret-\d", output), output

    counts, output = inner(folder, "--akadze-show-args")
    assert counts == {"failed": 2}, output
    assert "template='secret-2007', user_id=2" in output


def test_without_an_app_configured_the_fixture_says_how(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        async def test_needs_app(akadze_app): ...
        """,
        app="",
    )
    _, output = inner(folder)
    assert "akadze_app: name your app in the pytest configuration" in output, output


def test_the_template_can_carry_the_projects_own_schema(tmp_path: Path) -> None:
    folder = project(
        tmp_path,
        """
        import asyncpg
        import pytest
        from akadze.testing.plugin import migrate_akadze

        @pytest.fixture(scope="session")
        def akadze_migrate():
            async def build(url: str) -> None:
                await migrate_akadze(url)
                # the URLs are SQLAlchemy's (postgresql+asyncpg://); asyncpg wants postgresql://
                conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
                await conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
                await conn.close()
            return build

        async def test_both_schemas(akadze_database_url):
            conn = await asyncpg.connect(akadze_database_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                assert await conn.fetchval("SELECT count(*) FROM orders") == 0
                assert await conn.fetchval("SELECT count(*) FROM akadze_jobs") == 0
            finally:
                await conn.close()
        """,
    )
    counts, output = inner(folder)
    assert counts == {"passed": 1}, output


@pytest.mark.parametrize(
    "name", ["akadze_app", "akadze_database_url", "akadze_drain", "akadze_server_url", "database_url", "app"]
)
def test_the_plugin_is_loaded_beside_the_projects_own_fixtures(
    name: str, request: pytest.FixtureRequest
) -> None:
    """The project's own tests run with the plugin loaded. The plugin defines only prefixed
    names, so it never replaces a project fixture; the project uses the plugin's template and
    overrides akadze_server_url on purpose (tests/conftest.py)."""
    assert request.config.pluginmanager.get_plugin("akadze") is not None
    defs = request._fixturemanager.getfixturedefs(name, request.node)
    assert defs
    origins = [d.func.__module__.rsplit(".", 1)[-1] for d in defs]
    if name.startswith("akadze_"):
        assert origins[0] == "plugin"  # akadze.testing.plugin
        assert origins[1:] == (["conftest"] if name == "akadze_server_url" else [])
    else:
        assert origins == ["conftest"]


def test_the_projects_template_is_the_plugins(template_db: str, akadze_template_database: str) -> None:
    assert template_db == akadze_template_database
