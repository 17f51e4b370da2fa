"""Conditional registration and import side effects (hard cases 9 and 15), as docs/codegen.md
documents them.

Discovery imports the app in a subprocess with ``AKADZE_CODEGEN=1``, so these tests run the
real subprocess (``run_extract``) on a scratch app, in different environments:

- a registration that depends on a setting makes the output depend on the environment the
  command runs in;
- ``akadze.client.is_codegen()`` lets the app register every task it may register under
  codegen, so the output is the same wherever the command runs, while each worker still
  registers only its own; and it keeps import-time side effects out of codegen.
"""

from __future__ import annotations

import runpy
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from akadze_codegen import render_files
from akadze_codegen.cli import run_codegen
from akadze_codegen.extract import run_extract
from akadze_codegen.signature import decode_manifest
from tests.codegen.checkers import ROOT

APP = """
import os

from akadze import Akadze
from akadze.client import is_codegen

app = Akadze(database_url="postgresql://localhost/never-connected")
app.include("cg_cond_orders")
# a feature flag: the tasks exist only where the flag is set, codegen included
if os.environ.get("CG_COND_EXPORTS") == "1":
    app.include("cg_cond_exports")
# a regional module: its tasks run only in the EU deployment, but codegen sees them everywhere
if os.environ.get("CG_COND_REGION") == "eu" or is_codegen():
    app.include("cg_cond_eu")
"""
ORDERS = """
import os

from akadze import Akadze
from akadze.client import is_codegen

# an import-time side effect that needs a secret: never run while generating clients
PAYMENTS = None if is_codegen() else os.environ["CG_COND_PAYMENT_KEY"]


def register(app: Akadze) -> None:
    @app.task("orders.ship", queue="orders")
    async def ship(order_id: int) -> None:
        return None

    # a task registered under a condition inside register(app)
    if os.environ.get("CG_COND_AUDIT") == "1":

        @app.task("orders.audit", queue="orders")
        async def audit(order_id: int, reason: str) -> None:
            return None
"""
EXPORTS = """
def register(app):
    @app.task("exports.csv", queue="exports")
    async def csv(report_id: int) -> None:
        return None
"""
EU = """
def register(app):
    @app.task("eu.vat", queue="eu")
    async def vat(invoice_id: int, country: str) -> None:
        return None
"""
FLAGS = ("CG_COND_EXPORTS", "CG_COND_REGION", "CG_COND_AUDIT", "CG_COND_PAYMENT_KEY", "AKADZE_CODEGEN")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    sources = {
        "cg_cond_app": APP,
        "cg_cond_orders": ORDERS,
        "cg_cond_exports": EXPORTS,
        "cg_cond_eu": EU,
    }
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.syspath_prepend(str(tmp_path))
    for flag in FLAGS:
        monkeypatch.delenv(flag, raising=False)
    yield tmp_path
    for name in sources:
        sys.modules.pop(name, None)


def generated(project: Path) -> tuple[list[str], dict[str, bytes]]:
    """The task names discovery finds in the current environment, and the package's bytes."""
    manifest = run_extract("cg_cond_app:app", cwd=project)
    return [t.name for t in manifest.tasks], render_files(project / "clients", manifest)


def worker_tasks(project: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> list[str]:
    """The tasks the app registers when a worker imports it (here, not under codegen)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return sorted(runpy.run_path(str(project / "cg_cond_app.py"))["app"].tasks)


def test_a_setting_that_decides_registration_makes_the_output_depend_on_the_environment(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # generated where the flags are set, the clients hold the flagged tasks...
    monkeypatch.setenv("CG_COND_EXPORTS", "1")
    monkeypatch.setenv("CG_COND_AUDIT", "1")
    assert run_codegen("cg_cond_app:app", project / "clients", False, None) == 0
    manifest = decode_manifest((project / "clients" / "_manifest.json").read_bytes())
    assert [t.name for t in manifest.tasks] == ["eu.vat", "exports.csv", "orders.audit", "orders.ship"]
    # ...and --check where they are not reports them: run it where the worker is deployed
    monkeypatch.delenv("CG_COND_EXPORTS")
    monkeypatch.delenv("CG_COND_AUDIT")
    capsys.readouterr()
    assert run_codegen("cg_cond_app:app", project / "clients", True, None) == 1
    out = capsys.readouterr().out
    assert "cg_cond_exports.py: orphan" in out and "cg_cond_orders.py: stale" in out
    assert '-    "orders.audit",' in out


def test_is_codegen_registers_every_regional_task_so_the_output_is_the_same_everywhere(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the workers: each deployment registers its own tasks only
    monkeypatch.setenv("CG_COND_PAYMENT_KEY", "k")
    assert worker_tasks(project, monkeypatch, CG_COND_REGION="us") == ["orders.ship"]
    assert worker_tasks(project, monkeypatch, CG_COND_REGION="eu") == ["eu.vat", "orders.ship"]
    # codegen: every task, and byte for byte the same output whatever the region
    outputs = []
    for region in ("us", "eu"):
        monkeypatch.setenv("CG_COND_REGION", region)
        names, files = generated(project)
        assert names == ["eu.vat", "orders.ship"]
        outputs.append(files)
    assert outputs[0] == outputs[1]


def test_an_import_side_effect_guarded_by_is_codegen_does_not_stop_codegen(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without the secret a worker cannot even import the app...
    with pytest.raises(KeyError, match="CG_COND_PAYMENT_KEY"):
        worker_tasks(project, monkeypatch)
    # ...but codegen imports it (AKADZE_CODEGEN=1 in the discovery process) and never reads it
    assert run_codegen("cg_cond_app:app", project / "clients", False, None) == 0
    assert (project / "clients" / "cg_cond_orders.py").is_file()
