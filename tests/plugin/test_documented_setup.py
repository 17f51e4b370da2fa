"""The pytest configuration docs/testing.md gives, run as written in a fresh project: the
plugin's fixtures work and pytest-asyncio warns of nothing, warnings being errors (without
``asyncio_default_fixture_loop_scope`` it printed a PytestDeprecationWarning at every run)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

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
