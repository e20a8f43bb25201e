"""The console scripts' shared start and stop: one logged line and exit 1 on any failure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import rclpy
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from gp_mapper.ros.errors import TransitionError, one_line

# rclpy's own refusals of a parameter override (out of range, wrong type).
PARAMETER_ERRORS: tuple[type[Exception], ...] = (
    InvalidParameterValueException,
    InvalidParameterTypeException,
)
# Threads of spin_multithreaded: one per callback group that may be busy at once (inputs, a
# service that takes seconds, and the default group's timers, services and transitions).
SPIN_THREADS = 3


def spin_multithreaded(node: Node, threads: int = SPIN_THREADS) -> None:
    """Spin ``node`` on a MultiThreadedExecutor until shutdown: callbacks of different
    callback groups run at once, so a slow service in a group of its own does not stop the
    inputs (each group is mutually exclusive within itself)."""
    executor = MultiThreadedExecutor(num_threads=threads, context=node.context)
    try:
        rclpy.spin(node, executor)
    finally:
        shutdown_executor(executor)


def shutdown_executor(executor: Executor) -> None:
    """Shut an executor down and wait for the callbacks still running on its threads.

    rclpy 7.1.6's ``Executor.shutdown`` returns without waiting (it tests its shutdown flag
    after setting it), and a MultiThreadedExecutor's pool may still run a callback then: the
    pool is joined here, so a node is never destroyed under one of its callbacks.
    """
    executor.shutdown()
    pool = getattr(executor, "_executor", None)  # MultiThreadedExecutor's ThreadPoolExecutor
    if isinstance(pool, ThreadPoolExecutor):
        pool.shutdown(wait=True)


def run_node(
    name: str,
    make: Callable[[], Node],
    spin: Callable[[Node], None],
    invalid: tuple[type[Exception], ...],
    args: list[str] | None = None,
) -> None:
    """Start a node, spin it until shutdown (SIGINT), and tear it down.

    Exits with status 1, after one logged line with the reason and no traceback, when the
    parameters are invalid (``invalid``, or rclpy's ``PARAMETER_ERRORS``), a lifecycle node's
    autostart fails (``TransitionError``: the node has logged the reason) or anything else
    stops the node from starting or running.
    """
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s]: %(message)s")
    rclpy.init(args=args)
    node = None
    failed = False
    try:
        node = make()
        spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except TransitionError:
        failed = True  # the node logged why, once
    except (*invalid, *PARAMETER_ERRORS) as err:
        logging.getLogger(name).error("invalid parameters: %s", one_line(err, with_type=False))
        failed = True
    except Exception as err:  # anything else (an engine refusing a value, no CUDA...): one line
        stage = "cannot start" if node is None else "stopped"
        logging.getLogger(name).error("%s: %s", stage, one_line(err))
        failed = True
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    if failed:
        raise SystemExit(1)
