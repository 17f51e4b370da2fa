"""A change between two manifests as ``akadze codegen diff`` reports it, and the changes that
are not about a type: a field or parameter's requiredness and worker default (compat.py compares
the types, diff.py the tasks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from akadze_codegen import signature as ir

Verdict = Literal["breaking", "safe"]
#: when to deploy the worker relative to the (regenerated) producers for this change alone
Order = Literal["worker first", "producers first", "in steps", "any order"]


@dataclass(frozen=True, slots=True)
class Change:
    """One change between two manifests: its verdict for deployed producers, where it is,
    what it is, and the deploy order."""

    verdict: Verdict
    #: ``task`` or ``task(param.field[*])``
    where: str
    what: str
    order: Order = "any order"
    #: what changed at ``where`` ("queue", "value 'red'", ...): the reverse comparison reports
    #: the counterpart of this change under the same (where, topic)
    topic: str = field(default="", compare=False)

    def render(self, width: int = 0) -> str:
        """The line ``akadze codegen diff`` prints, ``where`` padded to ``width``."""
        label = "BREAKING" if self.verdict == "breaking" else "safe"
        return f"{label:<9}{self.where:<{width}}  {self.what}  [{self.order}]"


def requirement_changed(
    where: str, what: str, old: ir.Field | ir.Param, new: ir.Field | ir.Param
) -> list[Change]:
    """A field or parameter (``what``) that became optional or required, or whose worker
    default changed; nothing else."""
    if old.required and not new.required:
        return [Change("safe", where, f"{what} became optional", topic="required")]
    if new.required and not old.required:
        return [Change("breaking", where, f"{what} became required", topic="required")]
    if old.default != new.default and not old.required:
        return [default_changed(where, old.default, new.default)]
    return []


def default_changed(where: str, old: str | None, new: str | None) -> Change:
    """A worker default that changed: nothing for producers (they leave the value out and the
    worker's current default applies), but the generated ``# worker default:`` comment is
    stale, so ``--check`` reports the package and this says why (docs/codegen.md)."""
    shown = [text if text is not None else "(not shown)" for text in (old, new)]
    text = f"worker default changed: {shown[0]} -> {shown[1]} (clients omit it; regenerate for the comment)"
    return Change("safe", where, text, topic="default")
