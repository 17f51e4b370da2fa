"""No module of akadze/ or akadze_codegen/ over 400 lines (STYLE.md: a module reads in one
sitting). Docstrings are held by tests/test_docstrings.py."""

from __future__ import annotations

import pytest

from tests.support import ROOT

LIMIT = 400


@pytest.mark.parametrize("package", ["akadze", "akadze_codegen"])
def test_no_module_is_over_400_lines(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert long == {}
