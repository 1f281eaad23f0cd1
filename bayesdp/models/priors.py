"""Prior hyperparameters of the paper's model (section 3, eq. 4; section 4.1).

    theta ~ N(m, C),   sigma_y^2 ~ InvGamma(a, b),   Sigma_x ~ InvWishart(Lambda, kappa)

Paper defaults: a = 20, b = 0.5, m = 0, C = b/(a-1) I_d, kappa = d + 1. The paper (and the
authors' code) draw Lambda = V^T V at random for its experiments; with no information bayesdp's
default is Lambda = I_d. (The authors' final code uses C = (a-1)/b I = 38 I; Table 1 matches
C = b/(a-1) I, the paper text, which is our default.)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..errors import BayesdpInputError


@dataclasses.dataclass(frozen=True)
class Priors:
    """Hyperparameters; ``None`` fields take the paper's defaults for the data's d."""

    a: float = 20.0
    b: float = 0.5
    m: Optional[np.ndarray] = None
    C: Optional[np.ndarray] = None
    Lambda: Optional[np.ndarray] = None
    kappa: Optional[float] = None

    def resolve(self, d: int) -> "Priors":
        """Fill the defaults for dimension d and check every shape."""
        a, b = float(self.a), float(self.b)
        if not (a > 0 and b > 0):
            raise BayesdpInputError(f"priors: a and b must be > 0, got a={self.a}, b={self.b}")
        m = np.zeros(d) if self.m is None else np.asarray(self.m, dtype=float)
        if m.shape != (d,):
            raise BayesdpInputError(f"priors.m must have shape ({d},) for d={d}, got {m.shape}")
        C = (b / (a - 1.0) if a > 1 else 1.0) * np.eye(d) if self.C is None else _mat(self.C, d, "C")
        Lam = np.eye(d) if self.Lambda is None else _mat(self.Lambda, d, "Lambda")
        kappa = d + 1.0 if self.kappa is None else float(self.kappa)
        if not kappa > d - 1:
            raise BayesdpInputError(f"priors.kappa must be > d - 1 = {d - 1}, got {kappa}")
        return Priors(a=a, b=b, m=m, C=C, Lambda=Lam, kappa=kappa)

    def to_attrs(self) -> dict:
        """Flat description for InferenceData attrs."""
        out = {"prior_a": float(self.a), "prior_b": float(self.b)}
        for k in ("m", "C", "Lambda"):
            v = getattr(self, k)
            if v is not None:
                out[f"prior_{k}"] = np.asarray(v, dtype=float).ravel().tolist()
        if self.kappa is not None:
            out["prior_kappa"] = float(self.kappa)
        return out


def _mat(value, d, name):
    M = np.atleast_2d(np.asarray(value, dtype=float))
    if M.shape == (1, 1) and d != 1:
        M = float(M[0, 0]) * np.eye(d)
    if M.shape != (d, d):
        raise BayesdpInputError(f"priors.{name} must be {d} x {d} for d={d}, got shape {M.shape}")
    if not np.allclose(M, M.T) or np.any(np.linalg.eigvalsh(0.5 * (M + M.T)) <= 0):
        raise BayesdpInputError(f"priors.{name} must be symmetric positive definite")
    return 0.5 * (M + M.T)
