"""What a batch fit costs, for an estimate of its time before it starts.

Each batch model's registry entry says how much work a fit of N samples is at its settings
(:class:`FitCost`: the most units of work its schedule runs, L-BFGS evaluations, epochs or
iterations, and the floating-point operations of one), counted as a dense matrix product
would count them; this machine's rate at such products (:func:`measured_flop_rate`) turns it
into seconds. The counts are upper bounds of the schedule (every iteration run, a stopping
rule that never fires), so the estimate says "up to".
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch

# The product timed for the machine's rate: large enough to run at the BLAS's speed, small
# enough to cost a fraction of a second.
RATE_MATRIX_SIZE = 768
RATE_REPEATS = 3


class FitCost(NamedTuple):
    """The work of one fit.

    Attributes:
        units: the most units of work the fit's schedule runs.
        unit: what one is ("L-BFGS evaluations", "epochs", ...).
        flops_per_unit: the work of one, in the operations of a dense matrix product that
            takes as long on this kind of machine (a Cholesky or a kernel evaluation runs at
            a fraction of a product's rate: the entries' factors say by how much).
        final_flops: work done once after the schedule (the posterior's factorisation).
    """

    units: int
    unit: str
    flops_per_unit: float
    final_flops: float = 0.0

    @property
    def flops(self) -> float:
        return self.units * self.flops_per_unit + self.final_flops

    def seconds(self, rate: float) -> float:
        """The fit's time at ``rate`` [flop/s]."""
        return self.flops / rate if rate > 0.0 else math.inf

    def describe(self, rate: float) -> str:
        """ "up to 120 L-BFGS evaluations of 2.1 Tflop, ~12 min at 31 Gflop/s"."""
        if self.units == 0:  # no schedule: the work done once (a pre-fit, the posterior)
            return (
                f"no {self.unit}: {_flops(self.final_flops)} once, "
                f"~{_duration(self.seconds(rate))} at {rate / 1e9:.0f} Gflop/s"
            )
        return (
            f"up to {self.units} {self.unit} of {_flops(self.flops_per_unit)}, "
            f"~{_duration(self.seconds(rate))} at {rate / 1e9:.0f} Gflop/s"
        )


def measured_flop_rate(dtype: torch.dtype = torch.float64) -> float:
    """This machine's rate at a dense matrix product on the CPU, with torch's threads [flop/s]
    (the best of a few: the least disturbed by other work)."""
    n = RATE_MATRIX_SIZE
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, dtype=dtype, generator=generator)
    b = torch.randn(n, n, dtype=dtype, generator=generator)
    a @ b  # the first product warms the library up
    best = math.inf
    for _ in range(RATE_REPEATS):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / max(best, 1e-9)


def _flops(value: float) -> str:
    for unit, scale in (("Tflop", 1e12), ("Gflop", 1e9), ("Mflop", 1e6)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} flop"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 120.0:
        return f"{seconds:.0f} s"
    if seconds < 7200.0:
        return f"{seconds / 60.0:.0f} min"
    return f"{seconds / 3600.0:.1f} h"
