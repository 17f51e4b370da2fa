"""examples/fastapi_service end to end over HTTP: uvicorn on loopback and a real worker process,
both on the test's database (issue 17, point 4)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.conftest import wait_until
from tests.support import PYTHON, ROOT, fetch, subprocess_env

pytest.importorskip("fastapi")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM (a graceful stop), then its output."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        out, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out or ""


@pytest.fixture
def service(database_url: str) -> Iterator[str]:
    """The API on a loopback port, and a worker serving the example's queues."""
    port = free_port()
    env = subprocess_env(database_url)
    api = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "uvicorn",
            "examples.fastapi_service.service:api",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if api.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the service did not start: {stop(api)}")
        time.sleep(0.1)
    # the worker starts once the service created its table (its lifespan ran)
    worker = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "akadze.cli",
            "worker",
            "examples.fastapi_service.worker:app",
            "--poll-interval",
            "0.2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield base
    finally:
        worker_log = stop(worker)
        api_log = stop(api)
        assert "Traceback" not in worker_log, worker_log
        assert "Traceback" not in api_log, api_log


@pytest.fixture
async def http(service: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service, timeout=30) as client:
        yield client


async def test_an_order_is_charged_then_shipped_through_the_chain(
    http: httpx.AsyncClient, database_url: str
) -> None:
    placed = await http.post("/orders", json={"item": "book", "quantity": 2})
    assert placed.status_code == 201, placed.text
    order = placed.json()
    assert order["status"] == "placed"

    async def shipped() -> bool:
        seen: dict[str, Any] = (await http.get(f"/orders/{order['id']}")).json()
        return seen["status"] == "shipped"

    await wait_until(shipped, timeout=30)
    seen = (await http.get(f"/orders/{order['id']}")).json()
    assert seen == {
        "id": order["id"],
        "status": "shipped",
        "tracking": f"TRK-{order['id']:06d}",
        "charge": "succeeded",
    }
    jobs = await fetch(database_url, "SELECT task, state, args, result FROM akadze_jobs ORDER BY id")
    assert [(j["task"], j["state"]) for j in jobs] == [
        ("orders.charge", "succeeded"),
        ("orders.ship", "succeeded"),
    ]
    assert jobs[1]["args"] == f'{{"order_id": {order["id"]}}}'


async def test_a_refused_order_leaves_neither_the_order_nor_its_job(
    http: httpx.AsyncClient, database_url: str
) -> None:
    refused = await http.post("/orders", json={"item": "book", "quantity": 1000})
    assert refused.status_code == 409, refused.text
    assert await fetch(database_url, "SELECT id FROM akadze_jobs") == []
    assert await fetch(database_url, "SELECT id FROM shop_orders") == []


async def test_a_request_waits_for_its_jobs_result(http: httpx.AsyncClient) -> None:
    started = time.monotonic()
    answered = await http.post("/quotes", json={"item": "book", "quantity": 3})
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"item": "book", "quantity": "3", "total": "37.50"}
    assert time.monotonic() - started < 10
    # a job that fails: the request learns it as soon as the job ends
    failed = await http.post("/quotes", json={"item": "unicorn", "quantity": 1})
    assert failed.status_code == 422
    assert "failed" in failed.json()["detail"]


async def test_many_requests_wait_at_once(http: httpx.AsyncClient) -> None:
    answers = await asyncio.gather(
        *(http.post("/quotes", json={"item": "pen", "quantity": n}) for n in range(1, 21))
    )
    assert [a.status_code for a in answers] == [200] * 20
    assert [a.json()["total"] for a in answers] == [str(n * Decimal("1.20")) for n in range(1, 21)]


def test_the_example_clients_are_fresh() -> None:
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "akadze.cli",
            "codegen",
            "examples.fastapi_service.worker:app",
            "--out",
            "examples/fastapi_service/clients",
            "--check",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
