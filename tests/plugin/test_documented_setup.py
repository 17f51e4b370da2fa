"""The pytest configuration docs/testing.md gives, run as written in a fresh project: the
plugin's fixtures work and pytest-asyncio warns of nothing, warnings being errors (without
``asyncio_default_fixture_loop_scope`` it printed a PytestDeprecationWarning at every run)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.plugin.test_pytest_plugin import APP, inner
from tests.support import ROOT


def documented_ini() -> str:
    """The ``ini`` block of docs/testing.md's setup, with its app named ``myapp:app``."""
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    block = re.search(r"```ini\n(.*?)```", page, re.S)
    assert block is not None, "docs/testing.md has no ini block"
    ini = block.group(1)
    assert "akadze_app = myapp.worker:app" in ini
    return ini.replace("akadze_app = myapp.worker:app", "akadze_app = myapp:app")


def test_the_documented_pytest_ini_runs_without_a_warning(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(APP)
    (tmp_path / "pytest.ini").write_text(documented_ini())
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            """
            from akadze.testing import assert_enqueued
            from myapp import place


            async def test_place(akadze_app, akadze_drain):
                await place.enqueue(order_id=7)
                await assert_enqueued(akadze_app, "orders.place", order_id=7)
                assert await akadze_drain() == 2  # the order, then its receipt
            """
        )
    )
    counts, output = inner(tmp_path, "-W", "error")
    assert counts == {"passed": 1}, output
    assert "Warning" not in output, output


ENV_APP = """
from akadze import Akadze

app = Akadze()  # AKADZE_DATABASE_URL, as docs/install.md exports it


@app.task("hello")
async def hello(name: str) -> str:
    return f"hello {name}"
"""


def test_an_app_that_reads_akadze_database_url_imports_and_binds_in_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``app = Akadze()`` at import time with AKADZE_DATABASE_URL unset, as in a developer's
    shell: the test module imports it, and each test binds it to its own database."""
    monkeypatch.delenv("AKADZE_DATABASE_URL", raising=False)
    (tmp_path / "myapp.py").write_text(ENV_APP)
    (tmp_path / "pytest.ini").write_text(documented_ini())
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            """
            import os

            from myapp import hello


            async def test_hello(akadze_app, akadze_drain, akadze_database_url):
                job = await hello.enqueue(name="ada")
                assert await akadze_drain() == 1
                assert (await akadze_app.get_job(job.id)).result == "hello ada"
                assert "akadze_app_used_outside_a_test" in os.environ["AKADZE_DATABASE_URL"]
            """
        )
    )
    counts, output = inner(tmp_path, "-W", "error")
    assert counts == {"passed": 1}, output
