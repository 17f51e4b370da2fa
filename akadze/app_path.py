"""The one way an application is found from its path, ``module:attr``: by the command line,
by codegen's discovery and by its extraction subprocess.

Rules: the current directory is importable; ``attr`` may be dotted (``module:container.app``);
it names an Akadze, or a function of no arguments that returns one. Every failure is an
:class:`~akadze.errors.AppLoadError` with a one-line message that names what to fix.
"""

from __future__ import annotations

import importlib
import os
import sys
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

    An exception raised by the app's own import (or its factory) is the error's ``__cause__``,
    with its traceback, and ``raised_by_app`` is true.
    """
    module_name, attr = split_app_path(path)
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AppLoadError(path, f"cannot import {module_name!r} for app {path!r}: {exc}") from None
        raise _raised(path, f"importing {module_name!r}", exc) from exc
    except (Exception, SystemExit) as exc:  # the app's import can raise anything, sys.exit() too
        raise _raised(path, f"importing {module_name!r}", exc) from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise AppLoadError(path, f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, Akadze):
        try:
            target = target()
        except Exception as exc:  # a factory that needs arguments, or raised: say so, briefly
            raise _raised(path, f"calling {path!r} to build the app", exc) from exc
    if not isinstance(target, Akadze):
        raise AppLoadError(path, f"{path!r} is a {type(target).__qualname__}, not an Akadze application")
    return target


def _raised(path: str, doing: str, exc: BaseException) -> AppLoadError:
    if isinstance(exc, AkadzeError):
        message = f"{doing} failed: {_first_line(exc)}"
    else:
        message = f"{doing} raised {type(exc).__name__}: {_first_line(exc)}"
    return AppLoadError(path, message, raised_by_app=True)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
