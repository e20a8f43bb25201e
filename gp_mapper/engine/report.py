"""The report of a batch fit: the common core of every report plus the model's own details."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FitReport:
    """What one ``fit`` did. On rejection the model is exactly as before.

    Attributes:
        accepted: the fit was committed.
        reason: why it was rejected, or how it ended.
        n: data points given to the fit.
        m_before: support size before (0 for a first fit).
        m_after: support size after: kept points (exact, ACGP), inducing points (SVGP, SOLVE).
        hyperparameters: in the node's parameter names, after the fit.
        seconds_total: wall time.
        log_evidence: the model's estimate of log p(y) [nats], where it has one.
        lower, upper: bounds on log p(y) [nats], where the model has them.
        details: the model's own figures (scalars), e.g. ACGP's bound gap and M/N.
        num_outliers, bound_after_fit, nuisance: the streaming report's fields a batch fit
            has none of (0, None, {}), so every report has them.
    """

    accepted: bool
    reason: str
    n: int
    m_before: int
    m_after: int
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    seconds_total: float = 0.0
    log_evidence: float | None = None
    lower: float | None = None
    upper: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    num_outliers: int = 0
    bound_after_fit: float | None = None
    nuisance: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        """Flat scalars (list-valued hyperparameters joined), details merged in."""
        flat: dict[str, Any] = {
            "accepted": self.accepted,
            "reason": self.reason,
            "n": self.n,
            "m_before": self.m_before,
            "m_after": self.m_after,
            "seconds_total": self.seconds_total,
            "log_evidence": self.log_evidence,
            "lower": self.lower,
            "upper": self.upper,
        }
        flat.update(self.details)
        for name, value in self.hyperparameters.items():
            flat[name] = value if not isinstance(value, list) else ",".join(f"{x:g}" for x in value)
        return flat
