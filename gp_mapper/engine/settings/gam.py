"""Settings of the additive GP (seed 003): components, posterior form, rank, inducing points."""

from __future__ import annotations

from .setting import Setting

GAM = ("gam",)

GAM_SETTINGS: tuple[Setting, ...] = (
    Setting("gam_components", "offset+map", "str",
            "additive components: offset (a constant; its variance is constant_variance) + map "
            "(the kernel setting on x, y); map alone leaves the offset out",
            choices=("offset+map", "map"), read_only=True, models=GAM),
    Setting("gam_posterior", "coupled_precision", "str",
            "q over the inducing values: coupled_precision (the paper's K_UU⁻¹ + BBᵀ of rank "
            "gam_rank), full_coupled (one full Gaussian, Titsias' optimum), mean_field (one "
            "Gaussian per component)",
            choices=("coupled_precision", "full_coupled", "mean_field"), models=GAM),
    Setting("gam_rank", 0, "int",
            "R: rank of B in the precision form; 0 = min(M_tot, 2 · max M_c) (seed003 §6 "
            "'Caveat R': the paper's R = M can lose thousands of nats)",
            min=0, max=100000, models=GAM),
    Setting("gam_map_inducing", 256, "int",
            "inducing points of the map component, drawn from the log (seeded) [points]",
            min=1, max=100000, models=GAM),
    Setting("gam_iterations", 500, "int",
            "L-BFGS iterations of the fit (B of the precision form, and θ unless "
            "fit_iterations = 0, which keeps θ) [iterations]",
            min=0, max=100000, models=GAM),
)  # fmt: skip
