"""Discovery refuses what it cannot mirror faithfully: every problem at once, each with a fix."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pydantic import AliasPath, BaseModel, Field

from akadze import Akadze
from akadze.errors import AppLoadError, ConfigError
from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.problems import CodegenError


def problems_of(app: Akadze) -> list[str]:
    with pytest.raises(CodegenError) as caught:
        build_manifest(app, "test:app")
    return [p.render() for p in caught.value.problems]


def make() -> Akadze:
    return Akadze(database_url="postgresql://localhost/never-connected")


class Nested(BaseModel):
    street: str = Field(validation_alias=AliasPath("address", "street"))
    data: bytes


class Excluded(BaseModel):
    secret: str = Field(exclude=True)


def test_every_problem_is_listed_not_just_the_first() -> None:
    app = make()

    @app.task("a.one")
    async def one(n, nested: Nested) -> None:  # type: ignore[no-untyped-def]
        return None

    @app.task("a.two")
    async def two(excluded: Excluded) -> None:
        return None

    found = problems_of(app)
    assert len(found) == 4, found
    assert "a.one(n): the parameter has no annotation" in found[0]  # case 11
    assert "fix: annotate it" in found[0]
    assert any("Nested.street: validation_alias=AliasPath" in p for p in found)  # case 17
    assert any("Nested.data: bytes travel as base64" in p and "val_json_bytes" in p for p in found)  # 23
    assert any("Excluded.secret: a required field with exclude=True" in p for p in found)  # case 29


def test_task_names_that_collide_after_sanitising_are_an_error() -> None:
    app = make()

    @app.task("mail.send-mail")
    async def dashed() -> None:
        return None

    @app.task("mail.send_mail")
    async def underscored() -> None:
        return None

    (problem,) = problems_of(app)
    assert "tasks 'mail.send-mail' and 'mail.send_mail' both generate the name 'mail_send_mail'" in problem
    assert "fix: rename one of the tasks" in problem


def test_two_included_modules_with_the_same_last_component_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for package in ("cg_a", "cg_b"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "tasks.py").write_text(
            textwrap.dedent(
                f"""
                def register(app):
                    @app.task("{package}.run")
                    async def run() -> None:
                        return None
                """
            )
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    app = make()
    app.include("cg_a.tasks")
    app.include("cg_b.tasks")
    (problem,) = problems_of(app)
    assert "included modules 'cg_a.tasks' and 'cg_b.tasks' would both generate tasks.py" in problem


def test_a_decorator_without_wraps_is_refused_when_the_worker_registers_it() -> None:
    def bare(fn: Callable[..., Any]) -> Callable[..., Any]:
        async def inner(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **kwargs)

        return inner

    app = make()
    with pytest.raises(ConfigError, match=r"\*args and \*\*kwargs cannot be stored"):  # case 2
        app.register(bare(_async_noop), name="x")


def test_an_app_path_that_names_no_akadze_is_an_error() -> None:
    with pytest.raises(AppLoadError) as caught:
        load_app("akadze.db.locks:MIGRATE")
    assert "is a int, not an Akadze application" in str(caught.value)
    with pytest.raises(AppLoadError, match="has no attribute 'nope'"):
        load_app("akadze.app:nope")


def test_a_model_only_imported_under_type_checking_fails_at_registration_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cg_tc_models.py").write_text(
        "from pydantic import BaseModel\nclass Hidden(BaseModel):\n    x: int\n"
    )
    (tmp_path / "cg_tc_tasks.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from cg_tc_models import Hidden

            def register(app):
                @app.task("tc.run")
                async def run(hidden: Hidden) -> None:
                    return None
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="import the types the signature names at module level"):  # 12
        make().include("cg_tc_tasks")


async def _async_noop(user_id: int) -> None:
    return None


class Point(msgspec.Struct):
    x: int
    y: int


def test_a_worker_side_msgspec_struct_is_refused_when_the_worker_registers_it() -> None:
    """Case 31: the worker validates with pydantic, which reads no Struct, so a Struct argument
    never reaches codegen: registering the task fails, naming the task and the type."""
    app = make()

    async def draw(corner: Point) -> None:
        return None

    with pytest.raises(ConfigError, match=r"task 'shape\.draw': argument 'corner' \(.*Point\) holds Point"):
        app.register(draw, name="shape.draw")


def test_a_model_that_writes_bytes_as_text_is_a_problem_too() -> None:
    """val_json_bytes alone: clients' base64 is read right, but the worker-side enqueue writes
    the bytes as UTF-8 text, which its own validation then reads as base64 (issue 18.1)."""
    from pydantic import BaseModel, ConfigDict

    from akadze_codegen.mirror import Walker

    class ReadsOnly(BaseModel):
        model_config = ConfigDict(val_json_bytes="base64")
        data: bytes

    class Both(BaseModel):
        model_config = ConfigDict(val_json_bytes="base64", ser_json_bytes="base64")
        data: bytes

    walker = Walker({})
    walker.walk(Both, "t(x)")
    assert walker.problems == []
    walker.walk(ReadsOnly, "t(y)")
    assert [p.message for p in walker.problems] == [
        "bytes travel as base64, but this model reads or writes JSON bytes as UTF-8 text, so they "
        "would arrive corrupted"
    ]
