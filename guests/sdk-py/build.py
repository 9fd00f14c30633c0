#!/usr/bin/env python3
"""Builds and tests wasmop guests written in Python.

    python3 build.py component <app-dir> --out <guest.wasm> [--module app] [--wit <dir>]
    python3 build.py test <app-dir> <test files or dirs>... [--wit <dir>]

``component`` makes the component with componentize-py (the version
``requirements.txt`` beside this file pins) from the app module (default
``app``) in ``<app-dir>``, with this SDK on its path. ``test`` generates the
WIT's Python bindings, puts them, this SDK and ``<app-dir>`` on the path, with
a ``log`` that prints, and runs pytest (pinned there too).

The tools are taken from ``$WASMOP_PYTHON_TOOLS`` (a ``pip install
--target`` directory, where ``cargo xtask build-guests`` installs it), else
from ``.tools/`` beside the app, which this script fills with ``pip install
--target`` on first use.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SDK_DIR = Path(__file__).resolve().parent
WORLD = "operator-guest"


def fail(message: str) -> None:
    print(f"build.py: {message}", file=sys.stderr)
    sys.exit(1)


def wit_dir(app: Path, given: str | None) -> Path:
    if given:
        return Path(given).resolve()
    for candidate in (
        app / "wit",
        app.parent / "wit",
        SDK_DIR.parent.parent / "wit" / "operator@0.1.0",
    ):
        if (candidate / "operator.wit").is_file():
            return candidate
    fail("no wit/operator.wit found: pass --wit <dir>")
    raise AssertionError


def tools(app: Path) -> Path:
    """The directory holding componentize-py and pytest, installed on first use."""
    given = os.environ.get("WASMOP_PYTHON_TOOLS")
    target = Path(given).resolve() if given else app / ".tools"
    if not ((target / "componentize_py").is_dir() and (target / "pytest").is_dir()):
        requirements = SDK_DIR / "requirements.txt"
        print(f"--> installing {requirements.read_text().split()[0]} into {target}", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--root-user-action=ignore",
             "--target", str(target), "-r", str(requirements)],
            check=True,
        )
    return target


def componentize_py(app: Path, args: list[str]) -> None:
    target = tools(app)
    env = dict(os.environ, PYTHONPATH=str(target))
    command = [sys.executable, "-c", "import sys; from componentize_py import script; sys.exit(script())", *args]
    result = subprocess.run(command, env=env)
    if result.returncode != 0:
        fail(f"componentize-py failed: {' '.join(command)}")


def component(options: argparse.Namespace) -> None:
    app = Path(options.app).resolve()
    out = Path(options.out).resolve()
    wit = wit_dir(app, options.wit)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    componentize_py(
        app,
        ["-d", str(wit), "-w", WORLD, "componentize", "-p", str(app), "-p", str(SDK_DIR),
         options.module, "-o", str(out)],
    )
    size = out.stat().st_size
    print(f"--> {out} ({(size + 1023) // 1024} KiB) in {time.monotonic() - started:.1f} s", file=sys.stderr)


LOG_FOR_TESTS = '''
import sys
from wit_world.imports import log as _log

def _print(level, message):
    print(f"[{level.name.lower()}] {message}", file=sys.stderr)

_log.log = _print
'''


def test(options: argparse.Namespace) -> None:
    app = Path(options.app).resolve()
    wit = wit_dir(app, options.wit)
    with tempfile.TemporaryDirectory(prefix="wasmop-py-test-") as work:
        bindings = Path(work) / "bindings"
        componentize_py(app, ["-d", str(wit), "-w", WORLD, "bindings", str(bindings)])
        (Path(work) / "conftest.py").write_text(LOG_FOR_TESTS)
        # pytest comes with the tools (requirements.txt), not from the machine.
        paths = [work, str(bindings), str(SDK_DIR), str(app), str(tools(app))]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
        paths = [str(Path(p).resolve()) for p in options.tests]
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "--rootdir", str(app), *paths],
            env=env,
            cwd=work,
        )
        if result.returncode != 0:
            fail("tests failed")


def main() -> None:
    parser = argparse.ArgumentParser(description="Build and test wasmop guests written in Python.")
    sub = parser.add_subparsers(dest="mode", required=True)
    build = sub.add_parser("component", help="make the guest component")
    build.add_argument("app", help="the directory of the app module")
    build.add_argument("--out", required=True, help="the component to write")
    build.add_argument("--module", default="app", help="the app module (default: app)")
    build.add_argument("--wit", help="the WIT directory (default: found beside the app)")
    run_tests = sub.add_parser("test", help="run the guest's unit tests natively")
    run_tests.add_argument("app", help="the directory of the app module")
    run_tests.add_argument("tests", nargs="+", help="test files or directories")
    run_tests.add_argument("--wit", help="the WIT directory (default: found beside the app)")
    options = parser.parse_args()
    if shutil.which(sys.executable) is None:
        fail("no Python interpreter")
    {"component": component, "test": test}[options.mode](options)


if __name__ == "__main__":
    main()
