"""Problems found while generating: collected, then reported together with a fix for each."""

from __future__ import annotations

import msgspec


class CodegenProblem(msgspec.Struct, frozen=True):
    """One thing that stops generation, where it is, and how to fix it.

    ``where`` names the place: a task and parameter (``mail.send(user_id)``), a class and
    field (``myapp.models:Address.zip``), or a module.
    """

    where: str
    message: str
    fix: str = ""

    def render(self) -> str:
        """``where: message`` and, when there is one, the fix on its own line."""
        text = f"{self.where}: {self.message}"
        if self.fix:
            text += f"\n    fix: {self.fix}"
        return text


class AkadzeCodegenError(Exception):
    """Base of the errors akadze_codegen raises (drawn in akadze/errors.py).

    Not an AkadzeError: rendering from a manifest never imports akadze, whose package loads
    pydantic and the worker's modules.
    """


class CodegenError(AkadzeCodegenError):
    """Generation stopped; ``problems`` lists every problem found (exit code 2)."""

    def __init__(self, problems: list[CodegenProblem]) -> None:
        self.problems = problems
        super().__init__(render_problems(problems))


def render_problems(problems: list[CodegenProblem]) -> str:
    """Every problem as a list under one heading, as ``akadze codegen`` prints them (exit 2)."""
    count = len(problems)
    head = f"akadze codegen: {count} problem{'s' if count != 1 else ''}"
    return "\n".join([head, *(f"- {p.render()}" for p in problems)])
