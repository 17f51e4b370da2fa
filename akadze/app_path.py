"""The one way an application is found from its path, ``module:attr``: by the command line,
by codegen's discovery and by its extraction subprocess.

Rules: the current directory is importable; ``attr`` may be dotted (``module:container.app``);
it names an Akadze, or a factory: a function of no arguments declared to return one
(``def create_app() -> Akadze``). Nothing else is called: naming a task, or a function that does
not say it returns an Akadze, runs none of its code. Every failure is an
:class:`~akadze.errors.AppLoadError` with a one-line message that names what to fix.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import typing
from types import ModuleType
from typing import Any

from akadze.app import Akadze
from akadze.errors import AkadzeError, AppLoadError

#: the environment variable that names the app when the command line does not
APP_ENV = "AKADZE_APP"


def split_app_path(path: str) -> tuple[str, str]:
    """``module:attr`` as its two parts; AppLoadError when it is not of that form."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise AppLoadError(
            path,
            f"app path {path!r} must be module:attr; give it as module:attribute, "
            "for example myapp.worker:app",
        )
    return module_name, attr


def choose_app_path(positional: str | None, option: str | None) -> str | None:
    """The app named on the command line (APP or ``--app``), else ``AKADZE_APP``, else None.

    Naming two different apps (APP and ``--app``) is refused rather than one silently winning.
    """
    if positional and option and positional != option:
        raise AppLoadError(
            positional, f"the app is named twice ({positional!r} and --app {option!r}): give it once"
        )
    return positional or option or os.environ.get(APP_ENV) or None


def load_app(path: str) -> Akadze:
    """Import ``module:attr`` and return the Akadze it names (AppLoadError if it cannot).

    A factory is called only when it is a function of no arguments declared to return an
    Akadze; anything else (a task, an undeclared function, a class) is refused without being
    called. An exception raised by the app's own import (or its factory) is the error's
    ``__cause__``, with its traceback, and ``raised_by_app`` is true.
    """
    module_name, attr = split_app_path(path)
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    if "/" in module_name or "\\" in module_name:
        hint = _file_hint(module_name, attr)
        raise AppLoadError(path, f"{module_name!r} is a file path, not a module{hint}")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AppLoadError(
                path, f"cannot import {module_name!r} for app {path!r}: {exc}{_file_hint(module_name, attr)}"
            ) from None
        raise _raised(path, f"importing {module_name!r}", exc) from exc
    except (Exception, SystemExit) as exc:  # the app's import can raise anything, sys.exit() too
        raise _raised(path, f"importing {module_name!r}", exc) from exc
    module = target
    for part in attr.split("."):
        if not hasattr(target, part):
            raise AppLoadError(path, f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if isinstance(target, Akadze):
        return target
    factory = _factory(path, target, module)
    try:
        built = factory()
    except Exception as exc:  # the factory raised: say so, briefly
        raise _raised(path, f"calling {path!r} to build the app", exc) from exc
    if not isinstance(built, Akadze):
        raise AppLoadError(path, f"{path!r} returned a {type(built).__qualname__}, not an Akadze application")
    return built


def _factory(path: str, target: Any, module: ModuleType) -> Any:
    """``target`` when it is a factory akadze may call: a function (or method) of no required
    arguments declared to return an Akadze. Anything else is an AppLoadError, and is not called:
    naming a task instead of the app must not run the task's body."""
    from akadze.task import Task

    hint = _apps_hint(module)
    if isinstance(target, Task):
        raise AppLoadError(path, f"{path!r} is task {target.name!r}, not an Akadze application{hint}")
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        what = "a class" if isinstance(target, type) else f"a {type(target).__qualname__}"
        raise AppLoadError(path, f"{path!r} is {what}, not an Akadze application{hint}")
    if not _returns_akadze(target):
        raise AppLoadError(
            path,
            f"{path!r} is a function that does not declare it returns an Akadze, so akadze does "
            f"not call it; a factory says so: def {target.__name__}() -> Akadze{hint}",
        )
    needed = [
        p.name
        for p in inspect.signature(target).parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if needed:
        raise AppLoadError(
            path,
            f"{path!r} is a factory that needs arguments ({', '.join(needed)}); akadze calls it with none",
        )
    return target


def _returns_akadze(fn: Any) -> bool:
    """Whether ``fn``'s return annotation is Akadze (or a subclass), read without calling it."""
    try:
        declared = typing.get_type_hints(fn).get("return")
    except Exception:  # an annotation that does not resolve here: read its text
        text = getattr(fn, "__annotations__", {}).get("return")
        return isinstance(text, str) and text.rpartition(".")[2] == "Akadze"
    return isinstance(declared, type) and issubclass(declared, Akadze)


def _apps_hint(module: ModuleType) -> str:
    """``; name the app instead: mod:app`` when the module holds Akadze applications."""
    names = sorted(name for name, value in vars(module).items() if isinstance(value, Akadze))
    if not names:
        return ""
    listed = ", ".join(f"{module.__name__}:{name}" for name in names)
    return f"; name the app instead: {listed}"


def _file_hint(module_name: str, attr: str) -> str:
    """A file path given as the module (``shopapp.py``, ``src/shop/app.py``): its import name."""
    if not (module_name.endswith(".py") or "/" in module_name or "\\" in module_name):
        return ""
    relative = module_name.removesuffix(".py").removeprefix("./").replace("\\", "/")
    dotted = relative.strip("/").replace("/", ".")
    return f"; give the module's import name, not its file: {dotted}:{attr}"


def _raised(path: str, doing: str, exc: BaseException) -> AppLoadError:
    if isinstance(exc, AkadzeError):
        message = f"{doing} failed: {_first_line(exc)}"
    else:
        message = f"{doing} raised {type(exc).__name__}: {_first_line(exc)}"
    return AppLoadError(path, message, raised_by_app=True)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
