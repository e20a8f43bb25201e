"""Build the vendored ROS 2 Jazzy tf2_msgs into the running virtual environment.

There is no tf2_msgs wheel, so `make venv` builds it from vendor/tf2_msgs with the Jazzy
rosidl toolchain wheels: plain cmake, installed into the venv prefix, where the ros wheels'
bootstrap already puts $VENV/lib on LD_LIBRARY_PATH and site-packages on sys.path. Run it with
the venv's Python: `.venv/bin/python tools/build_tf2_msgs.py`. Exits non-zero on any failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "vendor" / "tf2_msgs"
SCRATCH = REPO / "build" / "tf2_msgs"
REQUIREMENTS = REPO / "requirements-build.txt"
# Imports the message and serializes one: that loads the C type support too, not only Python.
CHECK = (
    "from rclpy.serialization import serialize_message\n"
    "from tf2_msgs.msg import TFMessage\n"
    "serialize_message(TFMessage())\n"
)
# The wheels were built in a manylinux image; their exported CMake targets name that image's
# Python and numpy include directories, which do not exist here.
BAKED_PYTHON_INCLUDE = re.compile(r"/opt/python/[^/;\"]+/include/python3\.\d+")
BAKED_NUMPY_INCLUDE = re.compile(r"/opt/python/[^;\"]+/site-packages/numpy/(?:_core|core)/include")


def say(message: str) -> None:
    print(f"build_tf2_msgs: {message}", flush=True)


def fail(message: str) -> None:
    print(f"build_tf2_msgs: ERROR: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def importable(python: Path) -> bool:
    # A fresh interpreter: it sees what a later `import tf2_msgs` would see.
    result = subprocess.run([str(python), "-c", CHECK], capture_output=True)
    return result.returncode == 0


def run(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run one build step with its output in the log; on failure show the log's end and exit."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        fail(f"'{' '.join(command[:3])} ...' exited {result.returncode} (full log: {log})")


def patch_baked_paths(venv: Path) -> int:
    """Point the wheels' exported include paths at this interpreter's; returns files changed."""
    import numpy  # a runtime requirement of the project, so present in the venv

    python_include = sysconfig.get_paths()["include"]
    if not (Path(python_include) / "Python.h").is_file():
        fail(f"no Python.h under {python_include}: install this Python's development headers")
    changed = 0
    for path in (venv / "share").glob("*/cmake/*.cmake"):
        text = path.read_text()
        if "/opt/python/" not in text:
            continue
        new = BAKED_NUMPY_INCLUDE.sub(numpy.get_include(), text)
        new = BAKED_PYTHON_INCLUDE.sub(python_include, new)
        if new != text:
            path.write_text(new)
            changed += 1
    return changed


def main() -> None:
    start = time.monotonic()
    if sys.prefix == sys.base_prefix:
        fail("run this with the virtual environment's Python (.venv/bin/python)")
    venv = Path(sys.prefix)
    python = venv / "bin" / "python"
    if importable(python):
        say("tf2_msgs.msg.TFMessage already imports in this environment; nothing to build")
        return
    for tool in ("cmake", "make", "cc", "c++"):
        if shutil.which(tool) is None:
            fail(f"'{tool}' not found: the build needs cmake, make and a C/C++ compiler")

    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    log = SCRATCH / "build.log"

    say(f"installing the build toolchain ({REQUIREMENTS.name})")
    run([str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], log)
    say(f"pointed {patch_baked_paths(venv)} CMake export files at this Python's include paths")

    # Only the venv as prefix: the toolchain and the message packages tf2_msgs needs are there.
    env = dict(os.environ, CMAKE_PREFIX_PATH=str(venv))
    say("configuring (cmake)")
    run(
        [
            "cmake",
            "-S",
            str(SOURCE),
            "-B",
            str(SCRATCH / "cmake"),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_TESTING=OFF",  # the upstream linter tests need ament_lint, not installed
            f"-DPython3_EXECUTABLE={python}",
            f"-DCMAKE_INSTALL_PREFIX={venv}",
        ],
        log,
        env,
    )
    say(f"compiling on {os.cpu_count()} cores")
    run(["cmake", "--build", str(SCRATCH / "cmake"), "--parallel", str(os.cpu_count())], log, env)
    say(f"installing into {venv}")
    run(["cmake", "--install", str(SCRATCH / "cmake")], log, env)

    if not importable(python):
        fail(f"built and installed, but tf2_msgs still does not import with {python}")
    shutil.rmtree(SCRATCH)
    with contextlib.suppress(OSError):  # build/ itself only if nothing else uses it
        SCRATCH.parent.rmdir()
    say(f"tf2_msgs built and importable ({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
