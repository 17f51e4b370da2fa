"""examples/node_producer runs: its HTTP handler enqueues the welcome mail in its own
transaction through the generated TypeScript clients, and the Python worker runs the job."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from typing import Any

import pytest

from akadze.testing import drain
from tests.codegen.ts_node import NODE_PROJECT, require_node, tsc
from tests.support import fetch


def _post(port: int, data: object) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/signups", data=json.dumps(data).encode(), method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.timeout(300)
async def test_the_node_producer_enqueues_inside_its_own_transaction(database_url: str) -> None:
    node = require_node()
    built = tsc(NODE_PROJECT, "-p", "tsconfig.json")
    assert built.returncode == 0, built.stdout + built.stderr
    env = {**os.environ, "AKADZE_DATABASE_URL": database_url.replace("+asyncpg", ""), "PORT": "0"}
    server = subprocess.Popen(
        [node, "dist/src/server.js"], cwd=NODE_PROJECT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[-1])
        status, created = _post(port, {"user_id": 5, "email": "ada@example.com"})
        assert status == 201, created
        refused, error = _post(port, {"user_id": "five", "email": "bob@example.com"})
        assert refused == 422 and error["path"] == "$.to.user_id"
        duplicate, _ = _post(port, {"user_id": 5, "email": "again@example.com"})
        assert duplicate == 500  # the signup fails, and the job of that request rolls back with it
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stdout is not None:
            server.stdout.close()
    jobs = await fetch(database_url, "SELECT id, task, args FROM akadze_jobs")
    assert [(str(j["id"]), j["task"]) for j in jobs] == [(created["job_id"], "mail.send")]
    signups = await fetch(database_url, "SELECT user_id, email FROM signups")
    assert [tuple(r) for r in signups] == [(5, "ada@example.com")]
    from akadze import Akadze
    from examples.worker_app import app

    worker = Akadze(database_url=database_url)
    for name, task in app.tasks.items():
        worker.register(task.fn, name=name, queue=task.options.queue, max_attempts=task.options.max_attempts)
    try:
        await drain(worker)
    finally:
        await worker.dispose()
    (row,) = await fetch(database_url, "SELECT state, result FROM akadze_jobs")
    assert row["state"] == "succeeded" and json.loads(row["result"]) == {"template": "welcome"}
