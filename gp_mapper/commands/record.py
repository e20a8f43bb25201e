"""``gp-mapper record``: record the mapper's outputs into a rosbag2 bag, like ``ros2 bag record``.

The argument parsing, signal handling, exit codes and messages of the command; the recording
itself is ``gp_mapper.ros.recorder.record_bag``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from gp_mapper.io.bag_source import STORAGE_SUFFIXES
from gp_mapper.ros.errors import BagError
from gp_mapper.ros.recorder import DEFAULT_NODE, STORAGES, RecordResult, record_bag

__all__ = [
    "EXAMPLES",
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "add_record_arguments",
    "main",
    "run_record",
]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1  # the bag could not be created (it exists, disk, rosbags)
EXIT_BAD_INPUT = 2  # bad arguments: argparse's usage-error code
_PROG = "gp-mapper record"
DEFAULT_STORAGE = "mcap"

EXAMPLES = """\
examples:
  gp-mapper record maps.mcap                      until Ctrl-C
  gp-mapper record maps.mcap --duration 60 --inputs
  gp-mapper record maps --node /robot/gp_mapper --topics /odom --use-sim-time

OUT_BAG ending in .mcap or .db3 is written as that one file; any other name as a
rosbag2 directory (metadata.yaml beside the storage file).
"""


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``gp-mapper record`` to ``parser`` (and its examples)."""
    parser.epilog = EXAMPLES
    parser.add_argument(
        "out_bag",
        type=Path,
        help="the bag to create (must not exist): a .mcap or .db3 file, or a rosbag2 directory",
    )
    parser.add_argument(
        "--node",
        default=DEFAULT_NODE,
        help="fully qualified name of the mapper node whose outputs are recorded; "
        "default %(default)s",
    )
    parser.add_argument(
        "--inputs",
        action="store_true",
        help="also record the node's input topics (found from its subscriptions)",
    )
    parser.add_argument(
        "--topics",
        nargs="+",
        metavar="TOPIC",
        default=[],
        help="extra topics to record; their types are taken from the graph",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: until Ctrl-C)",
    )
    parser.add_argument(
        "--storage",
        choices=sorted(STORAGES),
        default=None,
        help=f"storage format (default: from an OUT_BAG ending in .mcap or .db3, else "
        f"{DEFAULT_STORAGE}, which opens in Foxglove)",
    )
    parser.add_argument(
        "--use-sim-time",
        action="store_true",
        help="stamp messages with /clock time instead of the system clock",
    )


def run_record(args: argparse.Namespace) -> int:
    """Run ``gp-mapper record`` until Ctrl-C, SIGTERM or ``--duration``.

    Returns:
        0 once the bag is closed; 1 if the bag cannot be created; 2 for a ``--duration``
        that is not positive (one line on stderr).
    """
    if args.duration is not None and not args.duration > 0.0:
        print(f"{_PROG}: error: --duration must be > 0; got {args.duration}", file=sys.stderr)
        return EXIT_BAD_INPUT
    named = STORAGE_SUFFIXES.get(args.out_bag.suffix)
    if args.storage is not None and named is not None and args.storage != named:
        message = f"{args.out_bag} names a {named} file, but --storage is {args.storage}"
        print(f"{_PROG}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    storage = args.storage or named or DEFAULT_STORAGE
    stop = threading.Event()
    restore = _install_stop_signals(stop)
    try:
        result = _record_as_named(
            args.out_bag,
            storage,
            node_name=args.node,
            inputs=args.inputs,
            topics=args.topics,
            duration_s=args.duration,
            use_sim_time=args.use_sim_time,
            stop=stop,
        )
    except BagError as err:
        print(f"{_PROG}: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        restore()
    logger.info(
        "wrote %d messages on %d topics to %s",
        sum(result.counts.values()),
        sum(1 for n in result.counts.values() if n),
        result.path,
    )
    return EXIT_OK


def _record_as_named(out_bag: Path, storage: str, **kwargs: object) -> RecordResult:
    """``record_bag`` into exactly ``out_bag``: one storage file when its name has a
    storage suffix (recorded in a directory beside it, then renamed into place).

    Raises:
        BagError: ``out_bag`` exists, or the bag cannot be written.
    """
    suffix = out_bag.suffix
    if suffix not in STORAGE_SUFFIXES:
        return record_bag(out_bag, storage=storage, **kwargs)  # type: ignore[arg-type]
    if out_bag.exists() or out_bag.is_symlink():
        raise BagError(f"{out_bag}: already exists; choose a new bag")
    parent = out_bag.parent if str(out_bag.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_bag.name}.", dir=parent))
    try:
        result = record_bag(staging / "bag", storage=storage, **kwargs)  # type: ignore[arg-type]
        (storage_file,) = (staging / "bag").glob(f"*{suffix}")
        os.replace(storage_file, out_bag)
    except OSError as err:
        raise BagError(f"{out_bag}: could not write the bag ({err})") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return RecordResult(out_bag, result.counts, result.missing)


def _install_stop_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM set ``stop`` (so the bag is closed properly); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, _frame: object) -> None:
        logger.info("%s: closing the bag", signal.Signals(signum).name)
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gp_mapper.commands.record OUT_BAG``: ``gp-mapper record`` alone."""
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Record the mapper's outputs (and optionally its inputs) to a bag.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_record_arguments(parser)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_record(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
