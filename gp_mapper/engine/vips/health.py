"""The health check of a fitted θ: is it a fit of the data, or a collapse to commit never?

A fit driven by data the Gaussian likelihood cannot explain (glitches that got past the screen,
or the screen turned off) ends in one of three ways: the noise variance swallows everything, orders
of magnitude above both the previous θ and the batch's own noise level; a kernel
hyperparameter runs onto its floor although the data have the structure it describes; or the
field turns rough (a lengthscale of the readings' own spacing under a large variance, which
lets every reading carry its own value) although neighbouring readings agree. The last is how
a window that disagrees with a tight carried posterior (a map fitted on a whole log, continued
on a new run with its own offsets) pulls θ away.
A map committed at such a θ is lost for good (every later batch is fitted from it), so the
engine refuses that θ: the batch is committed under the previous θ (the posterior the
provisional map already showed) and the report says why. Refusing the batch too would lose
its data, and a batch that disagrees with the map without being glitches (a real change of the
field, which the online posterior can reconcile with the old map only by raising the noise)
would then be refused on every visit.

Each test asks for the data's agreement before it refuses, so that a genuine change of θ (a
noisier sensor, a flat field) is fitted, not refused forever.

The first fit starts from the configured guess, which no data support: a rise of the noise
against it says nothing, and refusing it keeps the guess for good (every later window is then
fitted against a map committed at the guess, and asks for more). Until a fit has been
accepted, the noise is refused only where it would explain more than the whole batch's spread
(nothing left for the field), far above the batch's own noise level.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.kernels import LENGTHSCALE_FLOOR, VARIANCE_FLOOR, Kernel
from .robust import MAD_TO_STD

# The noise variance may rise by two orders of magnitude in one batch (a sensor warming up); a
# rise beyond this is refused when, in addition, the batch's own spread does not support it.
# The first fit, from the configured guess, is held to the batch's spread instead.
NOISE_RISE_MAX = 100.0
# How far above the batch's own noise level (``noise_level``) the noise variance may sit. The
# robust estimate's relative standard error is near 1.7/sqrt(N) (the MAD's efficiency), so 4x
# is more than ten standard errors at N = 100; the field's change between neighbouring
# readings only raises the estimate, which makes the test more lenient, never stricter.
NOISE_OVER_LEVEL_MAX = 4.0
# A value within 10 % of its floor is on it: the softplus transform approaches the floor only as
# the raw parameter runs off to −∞, which L-BFGS does only when the data push without bound.
FLOOR_MARGIN = 1.1
# The data show the structure a collapsed parameter denies when its evidence (the batch's robust
# variance for a kernel variance, its squared median for a constant) exceeds this many noise
# variances: 10 σ² is far outside what noise alone gives a batch of more than a few readings.
SIGNAL_OVER_NOISE = 10.0
# How much larger than the readings show a fitted θ may make the variance of the difference of
# field at neighbouring readings: two orders of magnitude, as for the noise (a sound θ at 50 Hz,
# 2 cm apart, gives ~10).
ROUGHNESS_MAX = 100.0
# Neighbour pairs per kernel evaluation block (the test costs N x this, not N²).
PAIR_BLOCK = 256
# Fewer readings than this say too little about their spread to support a drastic change of θ:
# a rise or a collapse that a smaller batch asks for is refused on the ratio alone.
MIN_READINGS = 8


def robust_spread(y: Tensor) -> tuple[float, float]:
    """The median and the robust variance (1.4826 · MAD)² of the targets [N] (µT, µT²)."""
    median = y.median()
    return float(median), float((MAD_TO_STD * (y - median).abs().median()) ** 2)


def noise_level(y: Tensor) -> float:
    """The noise variance the batch shows itself [µT²], from differences of neighbours.

    Neighbouring readings along a path see nearly the same field, so ``y[i+1] − y[i]`` is
    mostly the difference of two noises, of variance 2σ² (Rice's difference estimator, made
    robust with the MAD). Glitches move the MAD little; the field's own change between
    neighbours, or a batch in random order, only raises the estimate.
    """
    diff = y[1:] - y[:-1]
    return float((MAD_TO_STD * (diff - diff.median()).abs().median()) ** 2 / 2.0)


def neighbour_difference_variance(kernel: Kernel, X: Tensor) -> float:
    """The median over neighbouring inputs of Var(f[i+1] − f[i]) under θ [µT²]:
    k(xᵢ, xᵢ) + k(xⱼ, xⱼ) − 2 k(xᵢ, xⱼ), the field's part of what :func:`noise_level` sees.

    The noise's part (2σ²) is left out: a fit that spans several passes puts their
    discrepancy into σ², which neighbours within a pass never show (at 50 Hz they differ by
    0.02-0.1 µT², against a pass-to-pass error of 1-10 µT²). Whether σ² is sound is the noise
    test's question; this one asks whether the field is.
    """
    n = X.shape[0]
    parts = []
    with torch.no_grad():
        for i in range(0, n - 1, PAIR_BLOCK):
            a, b = X[i : min(i + PAIR_BLOCK, n - 1)], X[i + 1 : min(i + 1 + PAIR_BLOCK, n)]
            cross = torch.diagonal(kernel.K(a, b))
            parts.append(kernel.K_diag(a) + kernel.K_diag(b) - 2.0 * cross)
    return float(torch.cat(parts).median())


def group_spread(y: Tensor, group: Tensor | None) -> float:
    """The mean over target groups of their robust variances [µT²] (one group: the batch's):
    the spread of the field within each target (the potential's components differ in mean by
    tens of µT, which is no field variation). Groups of fewer than MIN_READINGS say too little
    and are left out; with none left, the batch's pooled spread."""
    if group is not None:
        members = [y[group == g] for g in group.unique()]
        spreads = [robust_spread(m)[1] for m in members if m.shape[0] >= MIN_READINGS]
        if spreads:
            return float(sum(spreads) / len(spreads))
    return robust_spread(y)[1]


def fit_problem(
    before: Kernel,
    noise_before: float,
    after: Kernel,
    noise_after: float,
    y: Tensor,
    X: Tensor | None = None,
    *,
    guess: bool = False,
    group: Tensor | None = None,
) -> str:
    """Why the fitted θ must not be committed, or "" if it may.

    Args:
        before: the kernel at the previous θ.
        noise_before: the previous noise variance σ² (µT²).
        after: the kernel at the fitted θ.
        noise_after: the fitted noise variance (µT²).
        y: the batch's targets [N] (µT), outliers already removed, in the order given (along
            the path for the pipeline's windows).
        X: the batch's inputs [N, D] in the same order; without them the roughness test is
            left out.
        guess: ``before`` is the configured initial θ, never fitted (no fit accepted yet).
        group: the target group [N] of each reading (``Kernel.target_groups``), for the
            spread the first fit and a collapsed kernel variance are held to; None: one group.

    Returns:
        A one-line reason naming the parameter and its values, or "".
    """
    y = y.detach()
    if y.shape[0] < MIN_READINGS:  # no evidence: nothing supports a drastic change
        median, spread, level = math.inf, math.inf, 0.0
    else:
        median = float(y.median())
        spread = group_spread(y, group)  # within each target: a field's variation
        level = noise_level(y)
    too_noisy = noise_after > NOISE_OVER_LEVEL_MAX * level
    if guess and y.shape[0] >= MIN_READINGS:
        # Against the guess, the batch's spread stands in for the previous noise (module
        # docstring).
        if too_noisy and noise_after > spread:
            return (
                f"noise variance {noise_after:.3g} µT² at the first fit exceeds the batch's "
                f"spread {spread:.3g} µT² and its own noise level {level:.3g} µT²"
            )
    elif too_noisy and noise_after > NOISE_RISE_MAX * noise_before:
        return (
            f"noise variance rose from {noise_before:.3g} to {noise_after:.3g} µT², far above "
            f"the batch's own noise level {level:.3g} µT²"
        )
    evidence = {"variance": spread, "constant_variance": median * median}
    for (kind, old), (_, new) in zip(_checked(before), _checked(after), strict=True):
        for name, value in new.items():
            floor = {"variance": VARIANCE_FLOOR, "lengthscale": LENGTHSCALE_FLOOR}.get(name)
            if floor is None or name not in old:
                continue
            limit = FLOOR_MARGIN * floor
            on_floor = bool((value.detach() <= limit).any())
            was_on_floor = bool((old[name].detach() <= limit).any())
            if not on_floor or was_on_floor:
                continue
            key = "constant_variance" if kind == "constant" else name
            shown = evidence.get(key)
            if shown is not None and shown <= SIGNAL_OVER_NOISE * noise_after:
                continue  # the data show no such structure: the floor is the fit's answer
            return (
                f"{kind} {name} fell onto its floor {floor:g} "
                f"(from {_fmt(old[name])} to {_fmt(value)})"
            )
    if X is not None and X.shape[0] >= 2:
        return _roughness_problem(before, noise_before, after, X, level)
    return ""


def _roughness_problem(
    before: Kernel, noise_before: float, after: Kernel, X: Tensor, level: float
) -> str:
    """The fitted θ makes the field at neighbouring readings differ orders of magnitude more
    than the readings do.

    With few readings (``level`` 0) the previous θ is the evidence, as for the noise.
    """
    rough_after = neighbour_difference_variance(after, X)
    if level > 0.0 and rough_after <= ROUGHNESS_MAX * 2.0 * level:
        return ""  # the usual case, decided without the previous θ's pass
    rough_before = neighbour_difference_variance(before, X)
    # Few readings: the previous θ's readings (its field and noise) are the evidence.
    shown = 2.0 * level if level > 0.0 else rough_before + 2.0 * noise_before
    limit = ROUGHNESS_MAX * shown
    if rough_after <= limit or rough_before > limit:  # agreed, or already so before this fit
        return ""
    return (
        f"the fitted θ makes the field at neighbouring readings differ with variance "
        f"{rough_after:.3g} µT² "
        f"where they differ with {shown:.3g} µT² (lengthscale {_fmt(_lengthscale(after))} m)"
    )


def _lengthscale(kernel: Kernel) -> Tensor:
    values = [g["lengthscale"] for _, g in kernel.hyperparameter_groups() if "lengthscale" in g]
    return torch.cat([v.detach().reshape(-1) for v in values]) if values else torch.zeros(0)


def _checked(kernel: Kernel) -> list[tuple[str, dict[str, Tensor]]]:
    """The groups a collapse is looked for in: a kernel may leave out parameters whose floor is
    a legitimate answer (``floor_checked_groups``: an additive model's nuisance components,
    which vanish where the data have no heading bias or drift); all of them by default."""
    checked = getattr(kernel, "floor_checked_groups", None)
    return kernel.hyperparameter_groups() if checked is None else checked()


def _fmt(value: Tensor) -> str:
    flat = value.detach().reshape(-1)
    return ", ".join(f"{float(v):.3g}" for v in flat)
