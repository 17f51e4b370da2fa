"""The fault scenarios write their worker logs in a folder of this run's own."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.support import PYTHON, ROOT


def test_each_run_writes_its_logs_in_a_folder_of_its_own(scenario_folder: Path, fault_logs: Path) -> None:
    assert scenario_folder.parent == fault_logs
    assert fault_logs.parent == Path(tempfile.gettempdir())
    assert fault_logs.name != "akadze-faults"
    assert list(scenario_folder.iterdir()) == []


def test_what_another_run_left_in_the_temp_directory_does_not_stop_a_run(tmp_path: Path) -> None:
    """Another user's run left akadze-faults behind (here a file: it cannot be removed or
    written into, as another user's folder cannot): this run still gets its log folders."""
    (tmp_path / "akadze-faults").write_text("left by another run\n")
    test = f"{Path(__file__).relative_to(ROOT)}::test_each_run_writes_its_logs_in_a_folder_of_its_own"
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fault scenario logs of this run: " + str(tmp_path) in done.stdout
