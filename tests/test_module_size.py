"""No module of akadze/ over 400 lines (STYLE.md: a module reads in one sitting)."""

from __future__ import annotations

from tests.support import ROOT

LIMIT = 400


def test_no_module_of_akadze_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in sorted((ROOT / "akadze").rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert long == {}
