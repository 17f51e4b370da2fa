"""Type aliases (hard case 28): inlined where they are used, generic ones with their arguments.

PEP 695's ``type`` statement needs Python 3.12; test_codegen_pythons.py runs it there and
compares with the ``typing_extensions.TypeAliasType`` spelling below.
"""

from __future__ import annotations

from typing import TypeVar

from typing_extensions import TypeAliasType

from akadze import Akadze
from akadze_codegen import signature as ir
from akadze_codegen.discover import build_manifest

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

Scores = TypeAliasType("Scores", dict[str, float])
Pair = TypeAliasType("Pair", tuple[T, T], type_params=(T,))
#: the value names the parameters in another order than the alias declares them
Flipped = TypeAliasType("Flipped", dict[V, list[K]], type_params=(K, V))
MaybePair = TypeAliasType("MaybePair", Pair[T] | None, type_params=(T,))


def app_with_aliases() -> Akadze:
    app = Akadze(database_url="postgresql://localhost/never-connected")

    @app.task("aliases.use")
    async def use(scores: Scores, pair: Pair[int], flipped: Flipped[int, str], maybe: MaybePair[str]) -> None:
        return None

    return app


def test_a_generic_alias_is_inlined_with_its_arguments_in_place_of_its_parameters() -> None:
    (task,) = build_manifest(app_with_aliases(), "test:app").tasks
    assert {p.name: p.type for p in task.params} == {
        "scores": ir.Dict(ir.Prim("str"), ir.Prim("float")),
        "pair": ir.Tuple([ir.Prim("int"), ir.Prim("int")]),
        "flipped": ir.Dict(ir.Prim("str"), ir.Seq("list", ir.Prim("int"))),
        "maybe": ir.Union([ir.Tuple([ir.Prim("str"), ir.Prim("str")]), ir.Prim("none")]),
    }
