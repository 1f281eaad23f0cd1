"""Prior hyperparameters of the paper's model (section 3, eq. 4; section 4.1).

    theta ~ N(m, C),   sigma_y^2 ~ InvGamma(a, b),   Sigma_x ~ InvWishart(Lambda, kappa)

Two families of defaults (docs/methods.md, "Priors"):

- ``Priors()`` - **weakly informative, scaled from what is public**: the release's bounds
  B_x >= ||x||_2 and B_y >= |y| and the dimension d (never the noisy statistics). With
  sd_y = B_y / 3 and sd_x = B_x / (3 sqrt(d)) (a per-feature scale: ||x||^2 sums d squared
  features):

      m = 0,  C = s^2 I  with  s = 2.5 sd_y / sd_x = 2.5 sqrt(d) B_y / B_x   (rstanarm's rule)
      a = 1/2,  b = (sd_y / 20)^2        (sigma_y = sd_y / (10 sqrt(2) |Z|): median sd_y / 9.5,
                                          90% prior interval sd_y / 28 .. 1.1 sd_y)
      kappa = d + 2,  Lambda = sd_x^2 I  (prior mean of Sigma_x = sd_x^2 I)

  A release without bounds has no public scale: the paper's priors are used, with a warning.
- ``Priors.paper()`` - the paper's priors for its rescaled data: a = 20, b = 0.5, m = 0,
  C = b/(a-1) I_d, kappa = d + 1, Lambda = I_d (the paper and the authors' code draw
  Lambda = V^T V at random for their experiments; pass ``Priors.paper(Lambda=...)``). Every
  reproduction of the paper uses these. (The authors' final code uses C = (a-1)/b I = 38 I;
  Table 1 matches C = b/(a-1) I, the paper text.)

Releases with an intercept (appendix B.2, ``release(..., intercept=True)``): theta = [theta_0,
beta] has d = p + 1 entries, p the features; Sigma_x (p x p) and the mean mu of the feature rows
belong to the features only. Weakly informative: the slopes as above with p; the intercept
sd s_0 = s B_x = 2.5 sqrt(p) B_y (the prior sd of x^T beta at ||x|| = B_x, since theta_0 =
E[y] - mu^T beta can be that large); Lambda = sd_x^2 I_p, kappa = p + 2; mu ~ N(0, (c B_x /
sqrt(p))^2 I_p), c the value of the ones column (1, or sqrt(k) with ``average_rows=k``, whose
rows have mean sqrt(k) mu). Paper family: C = b/(a-1) I_d, Lambda = I_p, kappa = p + 1,
mu ~ N(0, c^2 I_p) (the paper gives no prior for mu).

Fields given explicitly override the default family's value for that field.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Optional

import numpy as np

from ..errors import BayesdpInputError

# scipy.stats is imported inside the function that uses it: slow to import, and the bayesdp
# command imports this module for its --help

_DEFAULTS = ("weakly-informative", "paper")

#: Constants of the weakly-informative default (see the module docstring).
_SD_Y_PER_BOUND = 1.0 / 3.0  # sd_y = B_y / 3 (as the 'fast' plug-in sigma_y = B_y / 3)
_SD_X_PER_BOUND = 1.0 / 3.0  # sd_x = B_x / (3 sqrt(d))
_THETA_SCALE = 2.5  # s = 2.5 sd_y / sd_x (rstanarm, Gelman et al. 2008)
_SIGMA_SHAPE = 0.5  # a: one pseudo-observation
_SIGMA_SCALE_FRACTION = 1.0 / 20.0  # b = (sd_y / 20)^2
_KAPPA_EXTRA = 2.0  # kappa = d + 2: the smallest integer kappa with a finite prior mean

_NO_BOUNDS_WARNING = (
    "priors: the release has no public bounds (B_x, B_y), so the weakly-informative default "
    "has no scale; using the paper's priors (a=20, b=0.5, C=b/(a-1) I, kappa=d+1, Lambda=I), "
    "which suit data rescaled to |y| <= 1 only. Pass bayesdp.Priors(...) with your own scale "
    "or Priors.paper() to silence this.")


@dataclasses.dataclass(frozen=True)
class Priors:
    """Hyperparameters. ``None`` fields take the ``default`` family's value when resolved.

    ``default`` is "weakly-informative" (scaled from the release's public bounds; the default)
    or "paper" (:meth:`paper`). After :meth:`resolve`, ``source`` says what was used:
    "weakly-informative (public bounds)", "paper", "paper (no public bounds)", each with
    " + user (fields)" when some fields were given.
    """

    a: Optional[float] = None
    b: Optional[float] = None
    m: Optional[np.ndarray] = None
    C: Optional[np.ndarray] = None
    Lambda: Optional[np.ndarray] = None
    kappa: Optional[float] = None
    mu_mean: Optional[np.ndarray] = None  # intercept model only: mu ~ N(mu_mean, mu_cov)
    mu_cov: Optional[np.ndarray] = None
    default: str = "weakly-informative"
    source: Optional[str] = None  # set by resolve()
    intercept: Optional[bool] = None  # set by resolve(): resolved for a release with intercept

    @classmethod
    def paper(cls, **overrides) -> "Priors":
        """The paper's priors (a = 20, b = 0.5, m = 0, C = b/(a-1) I, kappa = d + 1,
        Lambda = I); keyword arguments override single fields (e.g. ``Lambda=V.T @ V``)."""
        return cls(default="paper", **overrides)

    @classmethod
    def weakly_informative(cls, d: int, bounds) -> "Priors":
        """The default weakly-informative priors for dimension d and public bounds (B_x, B_y)."""
        return cls().resolve(d, bounds=bounds)

    @property
    def user_fields(self) -> tuple:
        return tuple(k for k in ("a", "b", "m", "C", "Lambda", "kappa", "mu_mean", "mu_cov")
                     if getattr(self, k) is not None)

    def resolve(self, release_or_d, *, bounds=None, warn=True, intercept=False) -> "Priors":
        """Fill the defaults and check every shape.

        ``release_or_d`` is a :class:`~bayesdp.releases.Release` (its d, public bounds, intercept
        and average_rows are used) or the dimension d (counting the intercept column when
        ``intercept=True``), with ``bounds=(B_x, B_y)`` for the weakly-informative default.
        Without bounds the weakly-informative default falls back to the paper's priors and
        warns (``warn=False`` silences it). Resolving resolved priors returns them unchanged
        (apart from the shape checks).
        """
        column = 1.0  # the value of the ones column (sqrt(k) when rows are averaged in k)
        if isinstance(release_or_d, (int, np.integer)):
            d = int(release_or_d)
            intercept = bool(intercept)
        elif hasattr(release_or_d, "d"):
            d = int(release_or_d.d)
            intercept = bool(getattr(release_or_d, "intercept", False))
            column = math.sqrt(getattr(release_or_d, "average_rows", 1))
            if bounds is None:
                bounds = getattr(release_or_d, "bounds", None)
        else:
            raise BayesdpInputError(
                f"priors.resolve: expected a Release or the dimension d, got {release_or_d!r}")
        if self.default not in _DEFAULTS:
            raise BayesdpInputError(f"priors.default must be one of {_DEFAULTS}, "
                                    f"got {self.default!r}")
        if intercept and d < 2:
            raise BayesdpInputError(f"priors: a release with an intercept needs d >= 2 (the "
                                    f"intercept and a feature), got d={d}")
        p = d - 1 if intercept else d  # features with a Sigma_x (not the ones column)
        if (self.source is not None and self.m is not None and np.shape(self.m) == (d,)
                and bool(self.intercept) == intercept):
            return self._checked(d, self.source)
        base = self.default
        if base == "weakly-informative" and bounds is None:
            if warn and not {"a", "b", "C", "Lambda", "kappa"} <= set(self.user_fields):
                warnings.warn(_NO_BOUNDS_WARNING, UserWarning, stacklevel=3)
            base = "paper (no public bounds)"
        if base == "weakly-informative":
            Bx, By = _check_bounds(bounds)
            sd_y = _SD_Y_PER_BOUND * By
            sd_x = _SD_X_PER_BOUND * Bx / math.sqrt(p)
            a0 = _SIGMA_SHAPE
            b0 = (_SIGMA_SCALE_FRACTION * sd_y) ** 2
            C0 = (_THETA_SCALE * sd_y / sd_x) ** 2
            C00 = C0 * Bx**2  # intercept: s_0 = s B_x
            Lam0 = sd_x ** 2
            kappa0 = p + _KAPPA_EXTRA
            mu0 = (column * Bx) ** 2 / p
            label = "weakly-informative (public bounds)"
        else:
            a0, b0, C0, Lam0, kappa0 = 20.0, 0.5, None, 1.0, p + 1.0
            C00, mu0 = None, column**2
            label = base
        a = a0 if self.a is None else float(self.a)
        b = b0 if self.b is None else float(self.b)
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            raise BayesdpInputError(f"priors: a and b must be finite and > 0, got a={a}, b={b}")
        if C0 is None:  # the paper's C = b/(a-1) I, with the (possibly user-given) a and b
            C0 = b / (a - 1.0) if a > 1 else 1.0
        C_diag = np.full(d, C0)
        if intercept and C00 is not None:
            C_diag[0] = C00
        m = np.zeros(d) if self.m is None else np.asarray(self.m, dtype=float)
        C = np.diag(C_diag) if self.C is None else self.C
        Lam = Lam0 * np.eye(p) if self.Lambda is None else self.Lambda
        kappa = kappa0 if self.kappa is None else float(self.kappa)
        mu_mean = mu_cov = None
        if intercept:
            mu_mean = np.zeros(p) if self.mu_mean is None else np.asarray(self.mu_mean, float)
            mu_cov = mu0 * np.eye(p) if self.mu_cov is None else self.mu_cov
        elif self.mu_mean is not None or self.mu_cov is not None:
            raise BayesdpInputError("priors.mu_mean and mu_cov are the prior of the feature mean "
                                    "of the intercept model; this release has no intercept")
        if self.user_fields:
            label += " + user (" + ", ".join(self.user_fields) + ")"
        out = Priors(a=a, b=b, m=m, C=C, Lambda=Lam, kappa=kappa, mu_mean=mu_mean,
                     mu_cov=mu_cov, default=self.default, source=label, intercept=intercept)
        return out._checked(d, label)

    def _checked(self, d, label) -> "Priors":
        m = np.asarray(self.m, dtype=float)
        if m.shape != (d,):
            raise BayesdpInputError(f"priors.m must have shape ({d},) for d={d}, got {m.shape}")
        a, b = float(self.a), float(self.b)
        if not (a > 0 and b > 0):
            raise BayesdpInputError(f"priors: a and b must be > 0, got a={a}, b={b}")
        p = d - 1 if self.intercept else d
        what = f"p = {p} features (d = {d} with the intercept)" if self.intercept else f"d={d}"
        kappa = float(self.kappa)
        if not kappa > p - 1:
            raise BayesdpInputError(f"priors.kappa must be > {'p' if self.intercept else 'd'} "
                                    f"- 1 = {p - 1}, got {kappa}")
        mu_mean = mu_cov = None
        if self.intercept:
            mu_mean = np.asarray(self.mu_mean, dtype=float)
            if mu_mean.shape != (p,):
                raise BayesdpInputError(f"priors.mu_mean must have shape ({p},) for {what}, "
                                        f"got {mu_mean.shape}")
            mu_cov = _mat(self.mu_cov, p, "mu_cov", what)
        return Priors(a=a, b=b, m=m, C=_mat(self.C, d, "C"),
                      Lambda=_mat(self.Lambda, p, "Lambda", what), kappa=kappa,
                      mu_mean=mu_mean, mu_cov=mu_cov, default=self.default, source=label,
                      intercept=bool(self.intercept))

    @property
    def is_paper(self) -> bool:
        """Resolved from the paper's family (explicitly or as the no-bounds fallback)."""
        return self.default == "paper" or (self.source or "").startswith("paper")

    def nig_precision(self) -> np.ndarray:
        """Lambda_0 of the normal-inverse-gamma prior theta | sigma^2 ~ N(m, sigma^2 Lambda_0^-1)
        used by the non-private reference and MCMC-B&S.

        Paper priors: b/(a-1) I, as in the authors' code (docs/methods.md, "Priors"). Otherwise
        sigma_med^2 C^{-1}, where sigma_med^2 is the prior median of sigma_y^2, so that theta's
        prior at a typical sigma_y^2 is N(m, C)."""
        if self.m is None or self.C is None:
            raise BayesdpInputError("priors: resolve() them before asking for Lambda_0")
        d = np.asarray(self.m).shape[0]
        if self.is_paper and self.a > 1:
            return self.b / (self.a - 1.0) * np.eye(d)
        from scipy import stats

        med = float(stats.invgamma(self.a, scale=self.b).median())
        Cinv = np.linalg.inv(np.asarray(self.C, dtype=float))
        return med * 0.5 * (Cinv + Cinv.T)

    def to_attrs(self) -> dict:
        """Flat description for InferenceData attrs (``priors`` says which default was used)."""
        out = {"priors": self.source or ("user" if self.user_fields else self.default)}
        if self.a is not None:
            out["prior_a"] = float(self.a)
        if self.b is not None:
            out["prior_b"] = float(self.b)
        for k in ("m", "C", "Lambda", "mu_mean", "mu_cov"):
            v = getattr(self, k)
            if v is not None:
                out[f"prior_{k}"] = np.asarray(v, dtype=float).ravel().tolist()
        if self.kappa is not None:
            out["prior_kappa"] = float(self.kappa)
        return out

    def describe(self) -> str:
        """One line: the source and the hyperparameters (diagonal scales for C and Lambda)."""
        parts = [f"priors: {self.source or self.default}"]
        if self.a is not None:
            parts.append(f"sigma_y^2 ~ InvGamma(a={self.a:.4g}, b={self.b:.4g})")
        if self.C is not None:
            c = np.sqrt(np.diag(np.asarray(self.C, dtype=float)))
            parts.append("theta ~ N(m, C), sd " + ("%.4g" % c[0] if np.allclose(c, c[0])
                                                   else np.array2string(c, precision=3)))
        if self.Lambda is not None:
            lam = np.diag(np.asarray(self.Lambda, dtype=float))
            parts.append(f"Sigma_x ~ InvWishart(kappa={self.kappa:.4g}, Lambda diag "
                         + ("%.4g" % lam[0] if np.allclose(lam, lam[0])
                            else np.array2string(lam, precision=3)) + ")")
        if self.mu_cov is not None:
            sd = np.sqrt(np.diag(np.asarray(self.mu_cov, dtype=float)))
            parts.append("feature mean mu ~ N(mu_mean, mu_cov), sd " + (
                "%.4g" % sd[0] if np.allclose(sd, sd[0]) else np.array2string(sd, precision=3)))
        return "; ".join(parts)


def _check_bounds(bounds):
    try:
        Bx, By = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise BayesdpInputError(f"bounds must be (B_x, B_y), got {bounds!r}") from None
    if not (Bx > 0 and By > 0 and math.isfinite(Bx) and math.isfinite(By)):
        raise BayesdpInputError(f"bounds must be finite and > 0, got {bounds!r}")
    return Bx, By


def _mat(value, d, name, what=None):
    M = np.atleast_2d(np.asarray(value, dtype=float))
    if M.shape == (1, 1) and d != 1:
        M = float(M[0, 0]) * np.eye(d)
    if M.shape != (d, d):
        raise BayesdpInputError(f"priors.{name} must be {d} x {d} for {what or f'd={d}'}, got "
                                f"shape {M.shape}")
    if not np.allclose(M, M.T) or np.any(np.linalg.eigvalsh(0.5 * (M + M.T)) <= 0):
        raise BayesdpInputError(f"priors.{name} must be symmetric positive definite")
    return 0.5 * (M + M.T)
