"""The record of one engine update."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class UpdateReport:
    """What one ``update`` did. On rejection the engine state is exactly as before.

    Attributes:
        accepted: the batch was committed.
        reason: why it was rejected, or what limited the selection when accepted.
        n: batch size (outliers included).
        m_before, m_after: inducing points before and after (m_after == m_before if rejected).
        num_added: inducing points taken from this batch.
        num_outliers: readings dropped as outliers before selection and fit (``robust.py``).
        reference: L* under θ_o (VIPS), nats.
        noise_model: L_noise of the batch under the running statistics, nats.
        bound_at_selection: L̂ of the chosen set under θ_o (VIPS), nats.
        threshold: γ = L* − δ|L* − L_noise| (VIPS), nats.
        bound_after_fit: L̂ at the fitted θ, nats.
        fit_ok, fit_iterations, fit_message: the L-BFGS outcome (θ kept at θ_o if not ok).
        fit_inducing: inducing points in the bound θ was fitted on (fewer than m_after when
            the fit used the window's neighbourhood, ``local_fit.py``; 0 without a fit).
        num_cells: observations the window's readings became (``core.cells``); 0 when they
            were taken one by one.
        fit_refused: why the fitted θ failed the health check (``health.py``), the batch then
            committed under the previous θ; "" when the fitted θ was taken.
        hyperparameters: kernel hyperparameters and noise variance after the update.
        nuisance: a model with nuisance components: what the update learnt of them, flat
            scalars (``gam.stream``'s report names them); {} otherwise.
        seconds_select, seconds_provisional, seconds_fit, seconds_total: wall time
            (provisional: forming the pre-fit posterior and the caller's ``on_selected``).
    """

    accepted: bool
    reason: str
    n: int
    m_before: int
    m_after: int
    num_added: int = 0
    num_outliers: int = 0
    reference: float | None = None
    noise_model: float | None = None
    bound_at_selection: float | None = None
    threshold: float | None = None
    bound_after_fit: float | None = None
    fit_ok: bool = False
    fit_iterations: int = 0
    fit_message: str = ""
    fit_refused: str = ""
    fit_inducing: int = 0
    num_cells: int = 0
    hyperparameters: dict[str, float | list[float]] = field(default_factory=dict)
    nuisance: dict[str, float] = field(default_factory=dict)
    seconds_select: float = 0.0
    seconds_provisional: float = 0.0
    seconds_fit: float = 0.0
    seconds_total: float = 0.0

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        """Flat scalars for logs and diagnostics (list-valued hyperparameters joined)."""
        flat = {k: v for k, v in asdict(self).items() if k not in ("hyperparameters", "nuisance")}
        flat.update(self.nuisance)
        for name, value in self.hyperparameters.items():
            flat[name] = value if not isinstance(value, list) else ",".join(f"{x:g}" for x in value)
        return flat
