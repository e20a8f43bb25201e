"""A frozen description of a model, and the factories that build one from it.

The mapping layer, the node parameters and ``gp-mapper fit`` speak in settings by name
(``kernel``, ``acgp.block_size``); this is where they become objects. Every default and range
comes from the settings table (``gp_mapper.engine.settings``); the defaults are the
magnetometer model of Pescador-Barrios et al. 2024 (Sec. 5.4, App. D.4) with that paper's
recommended VIPS δ = 0.035 (App. D.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import torch

from .common_settings import COMMON_SETTINGS
from .core.kernels import Constant, Kernel, kernel_from_spec
from .core.linalg import Jitter
from .gam.settings import GamSettings, parse_components
from .model_settings import ModelSettings
from .model_table import model_names
from .setting import AUTO
from .settings import name_of, sections, setting_by_name
from .vips.selectors import ConditionalVariance, FixedSize, Oips, Selector, Vips
from .vips.settings import VipsSettings

DTYPES = {"float64": torch.float64, "float32": torch.float32}
S = TypeVar("S", bound=ModelSettings)


@dataclass(frozen=True, init=False)
class EngineSpec:
    """A model's settings: the shared ones as fields, each model package's own as its typed
    settings class (``section``). Units: inputs in m, targets in µT; see ``settings`` for each.

    Built from settings by name, namespaced as the node's parameters (``EngineSpec({"model":
    "acgp", "acgp.block_size": 500})``), or by keyword: a shared setting by its name, a
    model's by its name with the dot as an underscore (``acgp_block_size=500``) or its whole
    settings object (``acgp=AcgpSettings(block_size=500)``). A flat name of an earlier release
    (``delta`` for ``vips.delta``) is read with a ``FutureWarning``.

    Attributes:
        model: the model's registered name ("vips", "exact", "acgp").
        kernel: "matern52", "matern32" or "se" (added to a constant unless that is 0).
        constant_variance: variance of the constant offset kernel [µT²]; 0 leaves it out.
        kernel_variance: initial variance of the stationary kernel [µT²].
        lengthscale: initial lengthscale [m].
        ard: one lengthscale per input dimension.
        noise_variance: initial noise variance [µT²].
        fit_iterations: L-BFGS iterations (per batch for vips; 0 keeps θ fixed).
        jitter, jitter_relative: the first jitter of every Cholesky, relative or absolute.
        device: "auto", "cpu", "cuda" or "cuda:N".
        dtype: "float64" or "float32".
        seed: acgp, solvegp, cagp, cagp_cg, gam.
        sections: every registered model package's settings object (``VipsSettings``,
            ``AcgpSettings`` ..., a package registered from outside the engine too), in the
            settings table's order; ``section(cls)`` reads one.

    Raises:
        ValueError: a value out of range or of the wrong type, an unknown model or setting.
        TypeError: an unknown keyword.
    """

    model: str
    kernel: str
    constant_variance: float
    kernel_variance: float
    lengthscale: float
    ard: bool
    noise_variance: float
    fit_iterations: int
    jitter: float
    jitter_relative: bool
    device: str
    dtype: str
    seed: int
    sections: tuple[ModelSettings, ...]

    def __init__(self, values: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        table = setting_by_name()
        named = {name_of(k): v for k, v in (values or {}).items()}
        given: dict[str, ModelSettings] = {}
        namespaces = {cls.NAMESPACE: cls for cls in sections()}
        for key, value in keywords.items():
            if key == "sections":
                given.update({s.NAMESPACE: s for s in value})
            elif key in namespaces:
                if not isinstance(value, namespaces[key]):
                    raise TypeError(f"{key} must be a {namespaces[key].__name__}; got {value!r}")
                given[key] = value
            elif key in table:  # a shared setting, or a name unpacked from a mapping
                named[key] = value
            elif (name := table.name_of_keyword(key)) is not None:
                named[name] = value
            elif key in table.legacy_names():
                named[name_of(key)] = value
            else:
                raise TypeError(f"EngineSpec got an unknown keyword {key!r}")
        unknown = sorted(n for n in named if n not in table)
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}")
        for name in COMMON_NAMES:
            # Raises ValueError naming the setting; stores the canonical type (5 -> 5.0).
            value = named[name] if name in named else table.default(name)
            object.__setattr__(self, name, table.check(name, value))
        built = []
        for cls in namespaces.values():
            base = given.get(cls.NAMESPACE)
            own = {k: v for k, v in named.items() if k.startswith(f"{cls.NAMESPACE}.")}
            built.append(cls.of({**base.values(), **own}) if base is not None else cls.of(own))
        object.__setattr__(self, "sections", tuple(built))
        if self.model not in model_names():  # the registry's, read now: a model added later
            raise ValueError(
                f"model must be one of: {', '.join(model_names())}; got {self.model!r}"
            )
        Jitter(self.jitter, self.jitter_relative)  # raises ValueError on a bad pair
        parse_components(self.section(GamSettings).components)  # names a bad component

    def section(self, cls: type[S]) -> S:
        """The settings of one model package (``spec.section(AcgpSettings).block_size``); the
        defaults for a package registered after this spec was built."""
        for s in self.sections:
            if type(s) is cls:
                return s  # type: ignore[return-value]
        return cls()

    def get(self, name: str) -> Any:
        """One setting by name (``"kernel"``, ``"acgp.block_size"``).

        Raises:
            KeyError: no such setting.
        """
        name = name_of(name)
        if name in COMMON_NAMES:
            return getattr(self, name)
        namespace, _, key = name.partition(".")
        for s in self.sections:
            if namespace == s.NAMESPACE and key in s.__dataclass_fields__:
                return getattr(s, key)
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Every setting by name: the shared ones, then each model package's."""
        out: dict[str, Any] = {name: getattr(self, name) for name in COMMON_NAMES}
        for s in self.sections:
            out.update(s.values())
        return out

    @property
    def pass_noise_auto(self) -> bool:
        """Whether σ²_pass is measured from the map's data (``pass_noise_variance: auto``)
        rather than set: the model then starts with none."""
        return self.section(VipsSettings).pass_noise_variance == AUTO

    def replace(self, values: Mapping[str, Any] | None = None, /, **keywords: Any) -> EngineSpec:
        """A copy with some settings changed, by name or by keyword as the constructor takes
        them, validated."""
        out = EngineSpec({**self.to_dict(), **{name_of(k): v for k, v in (values or {}).items()}})
        return EngineSpec(out.to_dict(), **keywords) if keywords else out


# The shared settings: EngineSpec's own fields.
COMMON_NAMES: tuple[str, ...] = tuple(s.name for s in COMMON_SETTINGS)
assert tuple(f.name for f in fields(EngineSpec))[:-1] == COMMON_NAMES


def build_kernel(spec: EngineSpec, input_dim: int) -> Kernel:
    """The prior kernel the spec names, for inputs of dimension ``input_dim``."""
    stationary = kernel_from_spec(
        {
            "type": spec.kernel,
            "variance": spec.kernel_variance,
            "lengthscale": [spec.lengthscale],
            "ard_dims": input_dim if spec.ard else 0,
        }
    )
    if spec.constant_variance > 0.0:
        return Constant(spec.constant_variance) + stationary
    return stationary


def build_selector(spec: EngineSpec) -> Selector:
    s = spec.section(VipsSettings)
    return {
        "vips": lambda: Vips(s.delta),
        "cv": lambda: ConditionalVariance(s.eta),
        "oips": lambda: Oips(s.rho),
        "fixed": lambda: FixedSize(s.fixed_size),
    }[s.selector]()


def stream_options(spec: EngineSpec) -> dict[str, Any]:
    """The options of the stream (``OnlineSparseGP``) every streaming model runs."""
    s = spec.section(VipsSettings)
    return {
        "device": spec.device,
        "dtype": DTYPES[spec.dtype],
        "max_inducing": s.max_inducing,
        "fit_iterations": spec.fit_iterations,
        "hyperprior_scale": s.hyperprior_scale,
        "outlier_z": s.outlier_z,
        # "auto": the map measures it from its data and sets it (mapping/pass_noise.py).
        "pass_noise_variance": 0.0 if spec.pass_noise_auto else s.pass_noise_variance,
        "cell_size": s.cell_size,
        "jitter": Jitter(spec.jitter, spec.jitter_relative),
    }


def vips_options(spec: EngineSpec) -> dict[str, Any]:
    """The options of the VIPS model's engine beyond the shared ones."""
    s = spec.section(VipsSettings)
    return {
        "theta_memory": s.theta_memory,
        "local_fit_inducing": s.local_fit_inducing,
        "fit_max_seconds": s.fit_max_seconds,
    }
