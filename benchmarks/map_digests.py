"""Digests of the maps every route writes: the check that a change meant to move no map moved
none.

Cases (``--cases``). ``demo``: the demo's synthetic robot bag (what ``make demo`` maps: seed 0,
its duration, the robot's hard iron given as ``mag_bias``) replayed through the node's pipeline
(``gp-mapper replay``, poses from TF). ``aalto12``: Aalto invensense runs 1 and 2 as one bag
(``gp-mapper convert aalto``), replayed, and fitted by ``gp-mapper fit`` with each model
(``--models``, every one by default) at its defaults. ``floor``: the office floor of
``building.py`` (seed 0, its first ``--floor-minutes``), replayed (the tiled map) and fitted
with each model. A fit that refuses (``exact`` on a long bag) is recorded by its exit code and
last line: a refusal that changes is a change too.

Each map's ``map_state.npz`` is read back and every array hashed (SHA-256 of its dtype, shape
and bytes). Numeric arrays are the map; text arrays (the settings as JSON, the kernel specs)
are kept apart, since a change of a setting's name changes them and not the map. The numeric
arrays are also hashed as one sorted set, so a renamed key with the same bytes still matches.

    python benchmarks/map_digests.py [--cases demo,aalto12,floor] [--models vips,acgp,...]
        [--floor-minutes 5] [--cut-minutes 0] [--scratch /tmp/gp_mapper_digests] [--json F]
        [--check F]

``--check F`` compares with an earlier run's JSON and exits 1 naming every case whose numeric
set, exit code or arrays moved. Compare runs of one machine and one set of library versions:
another BLAS may round the last bit differently.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import format_table, write_json
from fit_models import training_bag

CASES = ("demo", "aalto12", "floor")
MODELS = ("vips", "potential", "exact", "acgp", "solvegp", "cagp", "cagp_cg", "gam", "gam_stream")
STATE = "map_state.npz"
# The exit code recorded for a map cut by --cut-minutes.
CUT = -1


def array_digest(array: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order)."""
    h = hashlib.sha256()
    h.update(str(array.dtype).encode())
    h.update(str(array.shape).encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def state_digests(path: Path) -> dict[str, Any]:
    """Every array of a map file, hashed; numeric ones and text ones apart (module docstring)."""
    numeric: dict[str, str] = {}
    text: dict[str, str] = {}
    with np.load(path, allow_pickle=False) as archive:
        for key in sorted(archive.files):
            array = archive[key]
            (text if array.dtype.kind in "US" else numeric)[key] = array_digest(array)
    combined = hashlib.sha256("".join(sorted(numeric.values())).encode()).hexdigest()
    return {"numeric_set": combined, "numeric": numeric, "text": text}


def run_cli(args: list[str], log: Path, cut_s: float | None = None) -> tuple[int, str, float]:
    """``gp-mapper ARGS`` in a child process; its exit code (``CUT`` when it ran past
    ``cut_s`` and was killed), last line and seconds."""
    start = time.perf_counter()
    with log.open("w") as out:
        try:
            code = subprocess.call(
                [sys.executable, "-m", "gp_mapper.cli", *args],
                stdout=out, stderr=subprocess.STDOUT, timeout=cut_s,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            code = CUT
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return code, lines[-1] if lines else "", time.perf_counter() - start


def demo_bag(scratch: Path) -> tuple[Path, list[str]]:
    """The demo's robot bag and the replay options that map it as the demo does."""
    from gp_mapper.commands.demo import DEFAULT_DURATION_S, DEFAULT_SEED
    from gp_mapper.io.robot_bag import DEFAULT_HARD_IRON_UT, write_synthetic_robot_bag

    bag = scratch / "demo_robot.mcap"
    if not bag.exists():
        write_synthetic_robot_bag(bag, seed=DEFAULT_SEED, duration_s=DEFAULT_DURATION_S)
    params = scratch / "demo_params.yaml"
    bias = ", ".join(repr(float(b)) for b in DEFAULT_HARD_IRON_UT)  # doubles: "5.0", not "5"
    params.write_text(f"/**:\n  ros__parameters:\n    mag_bias: [{bias}]\n")
    return bag, ["--params", str(params)]


def floor_bag(scratch: Path, minutes: float) -> Path:
    from gp_mapper.io.building import write_building_bag

    bag = scratch / f"floor_seed0_{minutes:g}min"
    if not bag.exists():
        write_building_bag(bag, seed=0, duration_s=60.0 * minutes)
    return bag


def jobs(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(case name, gp-mapper arguments without --out) of every map to make."""
    out: list[tuple[str, list[str]]] = []
    if "demo" in args.cases:
        bag, extra = demo_bag(args.scratch)
        out.append(("demo_replay", ["replay", str(bag), *extra]))
    for case in ("aalto12", "floor"):
        if case not in args.cases:
            continue
        bag = (
            training_bag(args.scratch)
            if case == "aalto12"
            else floor_bag(args.scratch, args.floor_minutes)
        )
        out.append((f"{case}_replay", ["replay", str(bag)]))
        out += [(f"{case}_{m}", ["fit", str(bag), "--model", m]) for m in args.models]
    return out


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What moved between two runs' cases (names present in both)."""
    moved = []
    for name in sorted(set(old) & set(new)):
        a, b = old[name], new[name]
        if a["returncode"] != b["returncode"]:
            moved.append(f"{name}: exit code {a['returncode']} -> {b['returncode']}")
            continue
        if a.get("numeric_set") == b.get("numeric_set"):
            continue
        keys = sorted(set(a.get("numeric", {})) | set(b.get("numeric", {})))
        differ = [k for k in keys if a["numeric"].get(k) != b["numeric"].get(k)]
        moved.append(f"{name}: {len(differ)} arrays moved ({', '.join(differ[:5])}"
                     f"{', ...' if len(differ) > 5 else ''})")  # fmt: skip
    return moved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--floor-minutes", type=float, default=5.0)
    parser.add_argument(
        "--cut-minutes",
        type=float,
        default=0.0,
        help="kill a map taking longer (recorded as exit -1); 0 = never",
    )
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/gp_mapper_digests"))
    parser.add_argument("--json", default=None)
    parser.add_argument("--check", type=Path, default=None, help="an earlier run's JSON")
    args = parser.parse_args(argv)
    args.cases = [c for c in args.cases.split(",") if c]
    args.models = [m for m in args.models.split(",") if m]
    for name, allowed in ((args.cases, CASES), (args.models, MODELS)):
        unknown = sorted(set(name) - set(allowed))
        if unknown:
            parser.error(f"unknown {', '.join(unknown)}; known: {', '.join(allowed)}")
    args.scratch.mkdir(parents=True, exist_ok=True)
    todo = jobs(args)
    results: dict[str, Any] = {}
    began = time.perf_counter()
    for i, (name, cli) in enumerate(todo):
        out = args.scratch / name
        cut_s = 60.0 * args.cut_minutes if args.cut_minutes > 0 else None
        log = args.scratch / f"{name}.log"
        code, last, seconds = run_cli([*cli, "--out", str(out)], log, cut_s)
        entry: dict[str, Any] = {"returncode": code, "last_line": last, "seconds": seconds}
        if code == 0 and (out / STATE).exists():
            entry |= state_digests(out / STATE)
        results[name] = entry
        elapsed = time.perf_counter() - began
        eta = elapsed / (i + 1) * (len(todo) - i - 1)
        print(f"  {name}: exit {code}, {seconds:.0f} s, set {entry.get('numeric_set', '-')[:12]} "
              f"({i + 1}/{len(todo)}, ETA {eta:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
    rows = [[name, str(r["returncode"]), f"{r['seconds']:.0f}", r.get("numeric_set", "-")[:16],
             str(len(r.get("numeric", {})))] for name, r in results.items()]  # fmt: skip
    print(format_table(["case", "exit", "s", "numeric set", "arrays"], rows))
    write_json(args.json, {"cases": results, "floor_minutes": args.floor_minutes})
    if args.check is not None:
        old = json.loads(args.check.read_text())["cases"]
        moved = compare(old, results)
        missing = sorted(set(old) - set(results))
        for line in moved:
            print(f"MOVED {line}")
        print(f"{len(results) - len(moved)} of {len(results)} cases unchanged"
              + (f"; not run here: {', '.join(missing)}" if missing else ""))  # fmt: skip
        return 1 if moved else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
