"""What the CLI and the library say about a job, in words a newcomer reads at once (issue 33):
wait_for's timeout names the job and its state, a finished job's state reads as a sentence ("has
succeeded", not "is succeeded"), `jobs show -o json` writes every time one way, and a worker that
ran one job says "1 run"."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable

import pytest
from typer.testing import Result

from akadze import Akadze, JobState
from akadze.client import wait_for as client_wait_for
from akadze.errors import WaitTimeoutError
from tests.cli.test_cli_database import enqueue_double
from tests.cli.test_jobs import Jobs, akadze, database_url, jobs
from tests.support import PYTHON, ROOT, subprocess_env

__all__ = ["akadze", "database_url", "jobs"]  # the fixtures, used by name


async def test_wait_for_times_out_naming_the_job_and_its_state(database_url: str) -> None:
    async with Akadze(database_url) as app:
        task = app.task("words.slow")(lambda: None)
        job = await task.enqueue()
        with pytest.raises(WaitTimeoutError) as caught:
            await app.wait_for(job.id, timeout=0.2)
        assert isinstance(caught.value, TimeoutError)
        assert (caught.value.job_id, caught.value.state) == (job.id, "queued")
        assert str(caught.value) == f"job {job.id} did not finish within 0.2s: it is still queued"
        with pytest.raises(WaitTimeoutError, match=f"job {job.id} did not finish within 0.1s"):
            await client_wait_for(job.id, timeout=0.1, engine=app.engine)


@pytest.mark.parametrize(
    ("state", "phrase"),
    [
        (JobState.QUEUED, "is queued"),
        (JobState.RUNNING, "is running"),
        (JobState.SUCCEEDED, "has succeeded"),
        (JobState.FAILED, "has failed"),
        (JobState.CANCELLED, "was cancelled"),
    ],
)
def test_every_state_reads_as_a_sentence(state: JobState, phrase: str) -> None:
    assert state.phrase == phrase


def test_explain_and_cancel_of_a_finished_job_read_as_sentences(
    jobs: Jobs, akadze: Callable[..., Result]
) -> None:
    job_id = jobs.enqueue("mail.send", drained=True, user_id=1).id
    explained = akadze("jobs", "explain", str(job_id))
    assert explained.stdout.splitlines()[0] == f"job {job_id} (mail.send in queue mail) has succeeded:"
    cancelled = akadze("jobs", "cancel", str(job_id))
    assert (cancelled.exit_code, cancelled.stderr.strip()) == (
        1,
        f"job is not active: job {job_id} has succeeded",
    )


def test_jobs_show_json_writes_every_time_one_way(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    failed = jobs.failed()
    shown = akadze("jobs", "show", str(failed.id), "-o", "json")
    document = json.loads(shown.stdout)
    times = [document[key] for key in ("run_at", "created_at", "started_at", "finished_at")]
    times += [error["at"] for error in document["errors"]]
    assert len(document["errors"]) == 2
    assert all(moment.endswith("Z") and "+00:00" not in moment for moment in times), times


async def test_a_worker_that_ran_one_job_says_one_run(database_url: str) -> None:
    await enqueue_double(database_url)
    done = await asyncio.to_thread(
        subprocess.run,
        [PYTHON, "-m", "akadze.cli", "worker", "tests.apps.bare:app", "--burst"],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.rstrip().endswith("stopped after 1 run"), done.stderr
