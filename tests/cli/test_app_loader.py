"""The app loader (akadze/app_path.py) calls nothing but a declared factory: naming a task, a
class or an undeclared function runs none of its code, and says what to name instead."""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from akadze import Akadze
from akadze.app_path import load_app
from akadze.cli import app as cli
from akadze.errors import AppLoadError

_numbers = itertools.count()

BODY = """
from pathlib import Path
from akadze import Akadze

MARK = Path(__file__).with_suffix(".ran")

app = Akadze("postgresql://u@127.0.0.1:1/db")

@app.task("shop.tidy")
def tidy() -> None:
    MARK.write_text("tidy ran")

def plain():
    MARK.write_text("plain ran")
    return app

def declared() -> Akadze:
    return app

def declared_text() -> "Akadze":
    return app

def needs(url: str) -> Akadze:
    MARK.write_text("needs ran")
    return app

class Settings:
    def __init__(self) -> None:
        MARK.write_text("Settings ran")
"""


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A module of its own name in the current directory, and the file its code writes when it runs."""
    name = f"shop_{next(_numbers)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(BODY))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, tmp_path / f"{name}.ran"
    sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("attr", "words"),
    [
        ("tidy", ("is task 'shop.tidy'", "name the app instead", ":app")),
        ("plain", ("does not declare it returns an Akadze", "def plain() -> Akadze", ":app")),
        ("needs", ("needs arguments (url)",)),
        ("Settings", ("is a class",)),
    ],
    ids=["a-task", "an-undeclared-function", "a-factory-that-needs-arguments", "a-class"],
)
def test_what_is_not_a_declared_factory_is_refused_and_never_called(
    shop: tuple[str, Path], attr: str, words: tuple[str, ...]
) -> None:
    module, mark = shop
    with pytest.raises(AppLoadError) as caught:
        load_app(f"{module}:{attr}")
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert not mark.exists(), mark.read_text()


@pytest.mark.parametrize("attr", ["app", "declared", "declared_text"])
def test_an_app_and_a_declared_factory_load(shop: tuple[str, Path], attr: str) -> None:
    module, _ = shop
    assert isinstance(load_app(f"{module}:{attr}"), Akadze)


def test_naming_a_task_on_the_command_line_runs_nothing(shop: tuple[str, Path]) -> None:
    module, mark = shop
    result = CliRunner().invoke(cli, ["worker", f"{module}:tidy", "--burst"], env={"AKADZE_APP": ""})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: '{module}:tidy' is task 'shop.tidy', not an Akadze application; "
        f"name the app instead: {module}:app"
    ]
    assert not mark.exists()


@pytest.mark.parametrize(
    ("given", "suggested"),
    [
        (lambda m: f"{m}.py:app", lambda m: f"{m}:app"),
        (lambda m: f"./{m}.py:app", lambda m: f"{m}:app"),
        (lambda m: f"src/{m}.py:app", lambda m: f"src.{m}:app"),
    ],
    ids=["file", "dot-slash", "folder"],
)
def test_a_file_path_as_the_app_gets_the_import_name(
    shop: tuple[str, Path], given: Callable[[str], str], suggested: Callable[[str], str]
) -> None:
    module, _ = shop
    with pytest.raises(AppLoadError) as caught:
        load_app(given(module))
    assert str(caught.value).endswith(f"give the module's import name, not its file: {suggested(module)}"), (
        str(caught.value)
    )
