"""The fault tests find Debian's pgbouncer (/usr/sbin) for a normal user too, whose PATH often
lacks the sbin folders: they said "pgbouncer is not installed" and skipped (issue 33)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults import pgbouncer

INSTALLED = [Path(folder) / "pgbouncer" for folder in pgbouncer.SBIN.split(os.pathsep)]


@pytest.mark.skipif(not any(path.is_file() for path in INSTALLED), reason="no pgbouncer in an sbin folder")
def test_pgbouncer_in_sbin_is_found_with_a_path_that_lacks_sbin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")))
    assert pgbouncer.available()
    found = pgbouncer.binary()
    assert found is not None and Path(found) in INSTALLED


def test_nothing_found_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(pgbouncer, "SBIN", "/nonexistent-sbin")
    assert pgbouncer.binary() is None and not pgbouncer.available()
