#!/usr/bin/env python3
"""Builds and tests wasmop guests written in Python.

    python3 build.py component <app-dir> --out <guest.wasm> [--module app] [--http [--wasi-wit <dir>]] [--wit <dir>]
    python3 build.py test <app-dir> <test files or dirs>... [--wit <dir>]
    python3 build.py hooks <app-dir> --wit <dir> --out <guest.wasm>

Both first check that the WIT is the contract this SDK is written for
(``CONTRACT``, the ``package`` line of ``operator.wit``) and stop otherwise.

``component`` makes the component with componentize-py (the version
``requirements.txt`` beside this file pins) from the app module (default
``app``) in ``<app-dir>``, with this SDK on its path. Its world follows the
module's top-level names: ``Operator``, and ``Admission`` and ``Conversion``
when it defines them (``admission-guest``, ``conversion-guest``,
``webhook-guest``). With ``--http`` the world also imports
``wasi:http/outgoing-handler`` (``wasmop_sdk.http``), whose WIT (WASI 0.2)
comes from ``--wasi-wit`` or ``$WASMOP_WASI_WIT``: a directory holding
``wasi-http``, ``wasi-io``, ``wasi-clocks`` … each with its ``package.wit``,
as jco ships them (``cargo xtask build-guests`` passes the jco that the
TypeScript SDK pins). ``test`` generates the WIT's Python bindings (without
``wasi:http``: requests fail as unavailable), puts them, this SDK and
``<app-dir>`` on the path, with a ``log`` that prints, and runs pytest
(pinned there too).

``hooks`` makes a Metacontroller hook guest from the app module ``wasmop
metacontroller build`` generates (``export_hooks`` of ``wasmop_hooks``
around the hook files): the world ``hook-guest`` of ``--wit``
(``wit/metacontroller@0.1.0``, whose package line must be
``HOOKS_CONTRACT``). componentize-py runs the app module while it builds, so
a hook file that does not load is refused here.

The tools are taken from ``$WASMOP_PYTHON_TOOLS`` (a ``pip install
--target`` directory, where ``cargo xtask build-guests`` installs it), else
from ``.tools/`` beside the app, which this script fills with ``pip install
--target`` on first use.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SDK_DIR = Path(__file__).resolve().parent
#: The WIT package this SDK is written for; another version is refused.
CONTRACT = "wasmop:operator@0.1.0"
#: The WIT package of a Metacontroller hook guest.
HOOKS_CONTRACT = "wasmop:metacontroller@0.1.0"
#: The world whose bindings the tests use: every export's.
TEST_WORLD = "webhook-guest"
#: The ``wasi:http`` version an ``--http`` guest imports (WASI 0.2: the host
#: serves every 0.2 version).
WASI_VERSION = "0.2.12"
#: The WASI packages ``wasi:http`` needs, as directories of ``--wasi-wit``.
WASI_PACKAGES = ("wasi-io", "wasi-clocks", "wasi-random", "wasi-cli", "wasi-filesystem", "wasi-sockets", "wasi-http")


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


def contract_wit(app: Path, given: str | None) -> Path:
    """The WIT directory, checked to be the contract this SDK is written for:
    ``operator.wit``'s ``package`` line must name ``CONTRACT``."""
    wit = wit_dir(app, given)
    text = (wit / "operator.wit").read_text()
    found = re.search(r"^\s*package\s+([^;\s]+)\s*;", text, re.MULTILINE)
    name = found.group(1) if found else "(no package line)"
    if name != CONTRACT:
        fail(
            f"{wit / 'operator.wit'} is the contract {name}, but this SDK is written for {CONTRACT}: "
            "build with the SDK of that contract version, or against the WIT this SDK came with"
        )
    return wit


def world_of(app: Path, module: str) -> str:
    """The world of the app module: from the classes and names it defines at
    its top level (``Operator``, ``Admission``, ``Conversion``)."""
    source = app / f"{module.replace('.', '/')}.py"
    if not source.is_file():
        fail(f"no app module {source}")
    names = set()
    for node in ast.parse(source.read_text(), str(source)).body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if "Operator" not in names:
        fail(f"{source} defines no Operator (Operator = export_operator(...))")
    admission, conversion = "Admission" in names, "Conversion" in names
    if admission and conversion:
        return "webhook-guest"
    if admission:
        return "admission-guest"
    if conversion:
        return "conversion-guest"
    return "operator-guest"


def http_wit(wit: Path, world: str, wasi: str | None, staging: Path) -> None:
    """Writes into ``staging`` a WIT package whose world ``guest`` is
    ``world`` and ``wasi:http/outgoing-handler``: the contract and the WASI
    packages from ``wasi`` as its dependencies."""
    given = wasi or os.environ.get("WASMOP_WASI_WIT")
    if not given:
        fail(
            "--http needs the WASI 0.2 WIT: pass --wasi-wit <dir> or set WASMOP_WASI_WIT "
            "(e.g. node_modules/@bytecodealliance/jco/lib/wit/builtin/0.2.12 of an installed jco)"
        )
    source = Path(given).resolve()
    missing = [p for p in WASI_PACKAGES if not (source / p / "package.wit").is_file()]
    if missing:
        fail(f"{source} lacks the WASI packages {', '.join(missing)}")
    found = re.search(r"^\s*package\s+wasi:http@([^;\s]+)", (source / "wasi-http" / "package.wit").read_text(), re.M)
    if not found or found.group(1) != WASI_VERSION:
        fail(f"{source / 'wasi-http'} is not wasi:http@{WASI_VERSION}")
    (staging / "deps" / "wasmop-operator").mkdir(parents=True)
    shutil.copy(wit / "operator.wit", staging / "deps" / "wasmop-operator" / "operator.wit")
    for package in WASI_PACKAGES:
        shutil.copytree(source / package, staging / "deps" / package)
    version = CONTRACT.split("@")[1]
    (staging / "guest.wit").write_text(
        "package wasmop:guest-build;\n\n"
        f"world guest {{\n  include wasmop:operator/{world}@{version};\n"
        f"  import wasi:http/outgoing-handler@{WASI_VERSION};\n}}\n"
    )


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
    wit = contract_wit(app, options.wit)
    world = world_of(app, options.module)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    build = ["componentize", "-p", str(app), "-p", str(SDK_DIR), options.module, "-o", str(out)]
    if options.http:
        with tempfile.TemporaryDirectory(prefix="wasmop-py-wit-") as staging:
            http_wit(wit, world, options.wasi_wit, Path(staging))
            # The contract's `types` keeps its module name beside wasi:http's.
            names = [
                "--import-interface-name", f"wasmop:operator/types@{CONTRACT.split('@')[1]}=types",
                "--import-interface-name", f"wasi:http/types@{WASI_VERSION}=http_types",
            ]
            componentize_py(app, ["-d", staging, "-w", "guest", *names, *build])
    else:
        componentize_py(app, ["-d", str(wit), "-w", world, *build])
    size = out.stat().st_size
    flavor = f"world {world}" + (", with outbound HTTP" if options.http else "")
    print(f"--> {out} ({(size + 1023) // 1024} KiB, {flavor}) in {time.monotonic() - started:.1f} s", file=sys.stderr)


def hooks(options: argparse.Namespace) -> None:
    app = Path(options.app).resolve()
    out = Path(options.out).resolve()
    wit = Path(options.wit).resolve()
    found = re.search(r"^\s*package\s+([^;\s]+)\s*;", (wit / "hooks.wit").read_text(), re.M)
    if found is None or found.group(1) != HOOKS_CONTRACT:
        fail(f"{wit / 'hooks.wit'} is {found.group(1) if found else '(no package line)'}, not {HOOKS_CONTRACT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    componentize_py(
        app,
        ["-d", str(wit), "-w", "hook-guest", "componentize", "-p", str(app), "-p", str(SDK_DIR), "app", "-o", str(out)],
    )
    size = out.stat().st_size
    print(f"--> {out} ({(size + 1023) // 1024} KiB, world hook-guest) in {time.monotonic() - started:.1f} s", file=sys.stderr)


LOG_FOR_TESTS = '''
import sys
from wit_world.imports import log as _log

def _print(level, message):
    print(f"[{level.name.lower()}] {message}", file=sys.stderr)

_log.log = _print
'''


def test(options: argparse.Namespace) -> None:
    app = Path(options.app).resolve()
    wit = contract_wit(app, options.wit)
    with tempfile.TemporaryDirectory(prefix="wasmop-py-test-") as work:
        bindings = Path(work) / "bindings"
        componentize_py(app, ["-d", str(wit), "-w", TEST_WORLD, "bindings", str(bindings)])
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
    build.add_argument("--http", action="store_true", help="import wasi:http (wasmop_sdk.http)")
    build.add_argument("--wasi-wit", help="the WASI 0.2 WIT for --http (default: $WASMOP_WASI_WIT)")
    build.add_argument("--wit", help="the WIT directory (default: found beside the app)")
    run_tests = sub.add_parser("test", help="run the guest's unit tests natively")
    run_tests.add_argument("app", help="the directory of the app module")
    run_tests.add_argument("tests", nargs="+", help="test files or directories")
    run_tests.add_argument("--wit", help="the WIT directory (default: found beside the app)")
    make_hooks = sub.add_parser("hooks", help="make a Metacontroller hook guest")
    make_hooks.add_argument("app", help="the directory of the generated app module")
    make_hooks.add_argument("--wit", required=True, help="the directory of hooks.wit")
    make_hooks.add_argument("--out", required=True, help="the component to write")
    options = parser.parse_args()
    if shutil.which(sys.executable) is None:
        fail("no Python interpreter")
    {"component": component, "test": test, "hooks": hooks}[options.mode](options)


if __name__ == "__main__":
    main()
