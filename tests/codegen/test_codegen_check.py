"""``akadze codegen --check``: 0 when current (writing nothing), 1 when stale, missing, orphaned or
edited by hand (with a diff), 2 on errors (every problem listed, each with a fix)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from akadze_codegen.cli import run_codegen
from akadze_codegen.problems import CodegenError
from tests.codegen.checkers import ROOT

APP = """
from akadze import Akadze

app = Akadze(database_url="postgresql://localhost/never-connected")
app.include("cg_check_orders")
app.include("cg_check_audit")
"""
ORDERS = """
from akadze import Akadze


def register(app: Akadze) -> None:
    @app.task("orders.ship", queue="orders")
    async def ship(order_id: int, express: bool = False) -> None:
        return None
"""
AUDIT = """
def register(app):
    @app.task("audit.record")
    async def record(event: str) -> None:
        return None
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A worker app in a scratch directory (discovery imports it from the working directory)."""
    for name, source in {"cg_check_app": APP, "cg_check_orders": ORDERS, "cg_check_audit": AUDIT}.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return tmp_path


def codegen(project: Path, *, check: bool) -> int:
    return run_codegen("cg_check_app:app", project / "clients", check, None)


def mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_check_exit_codes_follow_the_package_through_changes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = project / "clients"
    # current: exit 0, nothing written
    assert codegen(project, check=False) == 0
    before = mtimes(clients)
    assert codegen(project, check=True) == 0
    assert mtimes(clients) == before

    # a worker signature change: exit 1 with a unified diff, still nothing written
    (project / "cg_check_orders.py").write_text(
        textwrap.dedent(ORDERS).replace("order_id: int", "order_id: str, note: str | None = None")
    )
    capsys.readouterr()
    assert codegen(project, check=True) == 1
    out = capsys.readouterr().out
    assert "cg_check_orders.py: stale" in out
    assert "-    order_id: int" in out and "+    order_id: str" in out
    assert "Run `akadze codegen cg_check_app:app --out" in out
    assert mtimes(clients) == before
    assert codegen(project, check=False) == 0

    # in one go: a hand edit, a missing file, an orphan (a module no longer included), and a
    # file of the user's own that is never reported nor touched
    module = clients / "cg_check_orders.py"
    module.write_text(module.read_text().replace("order_id: str", "order_id: str | int"))
    (clients / "py.typed").unlink()
    own = clients / "notes.py"
    own.write_text("# not generated\n")
    (project / "cg_check_app.py").write_text(
        textwrap.dedent(APP).replace('app.include("cg_check_audit")\n', "")
    )
    capsys.readouterr()
    assert codegen(project, check=True) == 1
    out = capsys.readouterr().out
    assert "cg_check_orders.py: edited by hand" in out
    assert "+    order_id: str\n" in out
    assert "py.typed: missing" in out and "cg_check_audit.py: orphan" in out
    assert "notes.py" not in out
    assert "is out of date (1 edited by hand, 1 missing, 1 orphan, 2 stale)" in out

    # regenerating fixes everything, removes the orphan and leaves the user's file alone
    assert codegen(project, check=False) == 0
    assert not (clients / "cg_check_audit.py").exists()
    assert own.read_text() == "# not generated\n"
    after = mtimes(clients)
    assert codegen(project, check=True) == 0
    assert mtimes(clients) == after


BROKEN = """
from akadze import Akadze
from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import core_schema


class Money:
    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler: GetCoreSchemaHandler):
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class Parcel(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    label: bytes
    price: Money


def register(app: Akadze) -> None:
    @app.task("orders.ship", queue="orders")
    async def ship(order_id: int, price: Money, parcel: Parcel) -> None:
        return None
"""


def test_check_exits_2_listing_every_unsupported_type_with_a_fix(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "cg_check_orders.py").write_text(textwrap.dedent(BROKEN))
    assert codegen(project, check=True) == 2
    err = capsys.readouterr().err
    assert "akadze codegen: 3 problems" in err
    assert "orders.ship(price): unsupported type cg_check_orders:Money" in err
    assert "cg_check_orders:Parcel.price: unsupported type cg_check_orders:Money" in err
    assert "cg_check_orders:Parcel.label: bytes travel as base64" in err
    assert err.count("fix: ") == 3
    assert not (project / "clients").exists()


def test_a_type_override_in_pyproject_maps_an_unsupported_type_to_a_wire_type(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from akadze_codegen.discover import build_manifest, load_app, load_overrides
    from akadze_codegen.emit import render

    (project / "cg_override_orders.py").write_text(
        textwrap.dedent(BROKEN).replace("label: bytes", "label: str").replace("orders.ship", "override.ship")
    )
    (project / "cg_override_app.py").write_text(
        textwrap.dedent(APP)
        .replace("cg_check_orders", "cg_override_orders")
        .replace("cg_check_audit", "cg_check_orders")
    )
    (project / "pyproject.toml").write_text(
        '[tool.akadze.codegen.type_overrides]\n"cg_override_orders:Money" = "str"\n'
    )
    monkeypatch.syspath_prepend(str(project))
    overrides = load_overrides(project)
    assert overrides == {"cg_override_orders:Money": "str"}
    manifest = build_manifest(load_app("cg_override_app:app"), "cg_override_app:app", overrides)
    generated = render(manifest)["cg_override_orders.py"].decode()
    assert "    price: str\n" in generated
    (project / "pyproject.toml").write_text('[tool.akadze.codegen.type_overrides]\n"x:Y" = "money"\n')
    with pytest.raises(CodegenError, match="'money' is not a wire type"):
        load_overrides(project)


def test_check_exits_2_when_the_app_cannot_be_imported(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "cg_check_audit.py").write_text("raise RuntimeError('needs SECRET_KEY')\n")
    assert codegen(project, check=True) == 2
    err = capsys.readouterr().err
    assert "cg_check_app: importing the app failed" in err
    assert "RuntimeError: needs SECRET_KEY" in err
    assert "is_codegen()" in err


def test_the_akadze_command_line_returns_the_same_codes(project: Path) -> None:
    from typer.testing import CliRunner

    from akadze.cli import app

    def cli(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["codegen", *args])
        return result.exit_code, result.output

    assert cli("cg_check_app:app", "--out", "clients")[0] == 0
    module = project / "clients" / "cg_check_orders.py"
    module.write_text(module.read_text() + "# a comment\n")
    code, output = cli("cg_check_app:app", "--out", "clients", "--check")
    assert code == 1 and "edited by hand" in output
    manifest = str(project / "clients" / "_manifest.json")
    assert cli("--from-manifest", manifest, "--out", "clients")[0] == 0
    assert cli("--from-manifest", manifest, "--out", "clients", "--check")[0] == 0
    code, output = cli("not-an-app-path", "--out", "clients", "--check")
    assert code == 2 and "give it as module:attribute" in output
