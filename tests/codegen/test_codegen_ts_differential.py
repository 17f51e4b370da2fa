"""Differential test of the TypeScript client's guard against the worker's validation (issue 31
point 4), Node and Python side by side.

The values are the Python differential test's (tests/codegen/test_codegen_differential.py): for
every task of the golden apps and of its six seeded sets of random models, hypothesis builds
argument values as a producer holds them, valid and near-valid. Each is written as the JSON a
producer would send without any guard; then

- the TypeScript guard's verdict: the generated npm package's runtime (``Task.encode``) in a
  Node process, given that JSON as JavaScript values (integers past 2**53 as bigint);
- the worker's verdict: the worker's own codec validating that JSON;

and they must agree. When both accept, the JSON the TypeScript client would store must decode,
in the worker, to the same typed arguments. As in the Python test, two kinds of value are counted
apart because the guard refuses them by design while the worker would convert them: a binary
float for a Decimal, and a value of another JSON type that pydantic's lax mode converts.

Examples per target: ``AKADZE_DIFFERENTIAL_EXAMPLES`` (default 15, the CI run). The full run of
docs/typescript.md::

    AKADZE_DIFFERENTIAL_EXAMPLES=300 python -m pytest tests/codegen/test_codegen_ts_differential.py -q -s
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from akadze import Akadze
from akadze.client import RemoteTask, _encoder
from akadze_codegen.discover import build_manifest, load_app
from tests.codegen import test_codegen_differential as python_side
from tests.codegen.ts_node import Harness, build, generate, require_node

COUNTS: Counter[str] = Counter()
_HARNESSES: dict[str, Harness] = {}


@pytest.fixture(scope="module", autouse=True)
def _harnesses() -> Iterator[None]:
    import sys

    sys.path.insert(0, str(python_side.GOLDEN))  # the golden Python clients the values come from
    yield
    sys.path.remove(str(python_side.GOLDEN))
    for harness in _HARNESSES.values():
        harness.close()
    _HARNESSES.clear()
    if python_side.EXAMPLES:
        print("\nTypeScript differential counts:", dict(sorted(COUNTS.items())))


def _harness(key: str, app: Akadze, app_path: str, root: Path) -> Harness:
    if key not in _HARNESSES:
        require_node()
        dist = build(generate(build_manifest(app, app_path), root / f"ts_{key}"))
        _HARNESSES[key] = Harness(dist)
    return _HARNESSES[key]


def _compare(app: Akadze, harness: Harness, task: RemoteTask[Any], arguments: dict[str, Any]) -> None:
    try:
        payload = _encoder.encode(arguments)
    except (TypeError, UnicodeEncodeError):
        COUNTS["not JSON (no producer can send it)"] += 1
        return
    answer = harness.ask({"op": "check", "task": task.name, "args": payload.decode()})
    guard = None if answer["ok"] else answer["error"]
    worker, decoded = python_side._worker_verdict(app, task.name, payload)
    COUNTS["values"] += 1
    if guard is not None and ("a float cannot carry" in guard or python_side._has_by_design(arguments)):
        COUNTS["a float for a Decimal (refused by design)"] += 1
        return
    mismatch = re.search(r"Expected `([^`]+)`, got `([^`]+)`", guard or "")
    if worker is None and mismatch is not None:
        COUNTS[f"converted by the worker, refused by the strict guard: {mismatch[2]} for {mismatch[1]}"] += 1
        return
    if worker is None and guard is not None:
        if python_side._worker_verdict(app, task.name, payload, strict=True)[0] is not None:
            COUNTS["converted by the worker, refused by the strict guard: lax only"] += 1
            return
    assert (guard is None) == (worker is None), (
        f"{task.name}: TypeScript guard {'accepts' if guard is None else 'refuses'} ({guard}), worker "
        f"{'accepts' if worker is None else 'refuses'} ({worker}); row {payload[:400]!r}"
    )
    if guard is not None:
        COUNTS["refused by both"] += 1
        return
    stored, again = python_side._worker_verdict(app, task.name, answer["payload"].encode())
    assert stored is None, f"{task.name}: the worker refuses what the TypeScript client stores: {stored}"
    assert again == decoded, f"{task.name}: {payload!r} arrived as {again!r} from Node, {decoded!r} as sent"
    COUNTS["accepted by both"] += 1


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("package", "name"), python_side._golden_targets())
@python_side._SETTINGS
@given(data=st.data())
def test_the_typescript_guard_agrees_with_the_worker_on_the_golden_apps(
    package: str, name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app_path = python_side.GOLDEN_APPS[package]
    app = python_side._GOLDEN_APPS.setdefault(package, load_app(app_path))
    harness = _harness(package, app, app_path, tmp_path_factory.getbasetemp())
    task = python_side._client_tasks(package)[name]
    try:
        _compare(app, harness, task, data.draw(python_side.arguments(task)))
    finally:
        python_side._FLOATS_FOR_DECIMALS.clear()


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", python_side.RANDOM_SEEDS)
@python_side._SETTINGS
@given(data=st.data())
def test_the_typescript_guard_agrees_with_the_worker_on_random_models(
    seed: int, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.getbasetemp()
    app, tasks = python_side._random_target(seed, root)
    harness = _harness(f"random{seed}", app, f"tests:random{seed}", root)
    name = data.draw(st.sampled_from(sorted(tasks)))
    try:
        _compare(app, harness, tasks[name], data.draw(python_side.arguments(tasks[name])))
    finally:
        python_side._FLOATS_FOR_DECIMALS.clear()
