"""``akadze worker`` imports only what a worker runs: no code generation, no dashboard, no other
command group (docs/performance.md, "Worker memory"). A real worker process runs a job in burst
mode and lists its modules as it exits."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from akadze.app import Akadze
from tests.support import PYTHON, ROOT, fetchval, subprocess_env

#: the command line's entry point, and the modules it holds once the worker has returned
_RUN = """
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules)), flush=True))
sys.argv[0] = "akadze"
from akadze.cli import main
main()
"""

#: top-level packages a worker never runs
ABSENT_PACKAGES = ("akadze_codegen", "libcst", "rich", "jinja2", "starlette", "uvicorn")
#: akadze modules a worker never runs: the other command groups and the dashboard
ABSENT_MODULES = (
    "akadze.cli.db",
    "akadze.cli.jobs",
    "akadze.cli.queues",
    "akadze.cli.schedules",
    "akadze.cli.web",
    "akadze.cli.workers",
    "akadze.web",
)


def _worker_modules(database_url: str, *args: str) -> set[str]:
    done = subprocess.run(
        [PYTHON, "-c", _RUN, "worker", "tests.apps.basic:app", "--burst", *args],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


async def test_a_worker_process_holds_no_codegen_dashboard_or_other_command(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()

    @app.task("basic.fail", max_attempts=1)
    async def fail(reason: str) -> None:
        raise RuntimeError(reason)

    await fail.enqueue(reason="a run through the executor and the completer")
    modules = _worker_modules(database_url)

    assert await fetchval(database_url, "SELECT state FROM akadze_jobs") == "failed"
    # the walk sees the worker's own modules: it ran the job
    assert {"akadze.cli.worker", "akadze.worker.executor", "akadze.worker.completer"} <= modules
    held = sorted(m for m in modules if m.split(".")[0] in ABSENT_PACKAGES or m.startswith(ABSENT_MODULES))
    assert held == []


def _command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", _RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_every_command_group_is_still_listed_and_runs() -> None:
    """Deferred groups still show in --help (with their help line) and load when named."""
    done = _command("--help")
    assert done.returncode == 0, done.stderr
    for name in ("worker", "web", "db", "jobs", "schedules", "queues", "workers", "codegen"):
        assert f" {name} " in done.stdout
    assert "Look at the live workers." in done.stdout
    listed = _command("db", "--help")
    assert listed.returncode == 0, listed.stderr
    assert "migrate" in listed.stdout
    assert "akadze.cli.db" in json.loads(listed.stdout.split("MODULES ", 1)[1])
