"""The paper's simulated data (section 5.1), and the linear rows of the network simulations.

    V_ij iid N(0, 1),  Lambda = V^T V,  Sigma_x ~ InvWishart(Lambda, d + 1),
    theta ~ N(0, I_d),  x_i ~ N(0, Sigma_x),  y_i = x_i^T theta + e_i,  e_i ~ N(0, sigma_y^2).

``x_mean`` and ``intercept`` (not in the paper's simulation) give non-centred features
x_i ~ N(x_mean, Sigma_x) and y_i = intercept + x_i^T theta + e_i, for appendix B.2's model.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import BayesdpInputError, check_seed


@dataclasses.dataclass(frozen=True)
class SimulatedData:
    """A simulated data set with its true parameters.

    ``bounds`` are public bounds derived from the generating distribution (not from the rows):
    B_x = sqrt(lambda_max(Sigma_x) * chi2_d quantile) and B_y = sd(y) * normal quantile, both at
    tail probability ``1e-3 / n``, so a row is clipped with probability about 1e-3 / n.
    """

    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray
    Sigma_x: np.ndarray
    Lambda: np.ndarray
    sigma_y: float
    bounds: tuple
    x_mean: np.ndarray = None  # (d,) feature mean (zeros for the paper's simulation)
    intercept: float = 0.0  # the true intercept of y

    @property
    def feature_names(self):
        return tuple(f"x{i}" for i in range(self.X.shape[1]))


def simulate(n=100_000, d=5, *, seed=None, sigma_y=1.0, x_mean=0.0, intercept=0.0) -> SimulatedData:
    """Draw the paper's simulated regression data set (see module docstring).

    ``x_mean`` (a number or d numbers) shifts the features, ``intercept`` is added to y (both 0
    in the paper); the public bounds add ||x_mean|| to B_x and |E y| to B_y."""
    if int(n) < 1 or int(d) < 1:
        raise BayesdpInputError(f"n and d must be >= 1, got n={n}, d={d}")
    if not sigma_y > 0:
        raise BayesdpInputError(f"sigma_y must be > 0, got {sigma_y}")
    from scipy import stats  # here, not on import: `import bayesdp` loads no scipy.stats

    n, d = int(n), int(d)
    rng = np.random.default_rng(check_seed(seed))
    V = rng.standard_normal((d, d))
    Lambda = V.T @ V
    Sigma_x = np.atleast_2d(stats.invwishart(df=d + 1, scale=Lambda).rvs(random_state=rng))
    Sigma_x = 0.5 * (Sigma_x + Sigma_x.T)
    theta = rng.standard_normal(d)
    mean = np.broadcast_to(np.asarray(x_mean, dtype=float), (d,)).copy()
    if not (np.all(np.isfinite(mean)) and np.isfinite(intercept)):
        raise BayesdpInputError(f"x_mean and intercept must be finite, got {x_mean!r}, "
                                f"{intercept!r}")
    X = rng.standard_normal((n, d)) @ np.linalg.cholesky(Sigma_x).T
    y = X @ theta + sigma_y * rng.standard_normal(n)
    tail = 1e-3 / n
    bx = float(np.sqrt(np.linalg.eigvalsh(Sigma_x)[-1] * stats.chi2.isf(tail, d)))
    sd_y = float(np.sqrt(theta @ Sigma_x @ theta + sigma_y**2))
    by = float(sd_y * stats.norm.isf(tail / 2))
    if np.any(mean != 0) or intercept != 0:
        X = X + mean
        y = y + float(intercept) + float(mean @ theta)
        bx += float(np.linalg.norm(mean))
        by += abs(float(intercept) + float(mean @ theta))
    return SimulatedData(X=X, y=y, theta=theta, Sigma_x=Sigma_x, Lambda=Lambda,
                         sigma_y=float(sigma_y), bounds=(bx, by), x_mean=mean,
                         intercept=float(intercept))


def linear_rows(theta, shape, *, sigma_y, x_mean=0.0, x_sd=1.0, intercept=False, seed=None):
    """Rows (X, y) of a linear design with independent features, as the network simulations
    (``bayesdp simulate-network``, docs/adapters/) draw them:

        x_ik iid N(x_mean, x_sd^2)  (x_i0 = 1 when ``intercept``),  y_i = x_i^T theta + e_i,
        e_i iid N(0, sigma_y^2).

    ``shape`` is the shape of the rows, e.g. ``(n,)``, ``(nodes, rows)`` or ``(rounds, n)``: X has
    shape ``(*shape, d)`` and y ``shape``, d = len(theta). Every x is drawn before any e.
    ``seed``: an int, None or a ``numpy.random.Generator`` (used as it is)."""
    rng = np.random.default_rng(seed)
    theta = np.asarray(theta, dtype=float)
    shape = tuple(shape)
    X = rng.normal(x_mean, x_sd, size=(*shape, theta.size))
    if intercept:
        X[..., 0] = 1.0
    y = X @ theta + rng.normal(0.0, sigma_y, size=shape)
    return X, y


#: simulate_table's log-linear model of the hourly count: log(cnt + 1) = TABLE_MEAN +
#: sum of these effects (per unit of a numeric column centred at 0.5, per level against level 1)
#: + N(0, TABLE_NOISE^2); cnt is rounded and kept in [0, 1000]
TABLE_EFFECTS = {"temp": 2.0, "hum": -1.0, "windspeed": -0.5, "workingday": 0.2,
                 "season": (0.0, 0.3, 0.2, 0.4), "weathersit": (0.0, -0.2, -0.6, -1.0)}
TABLE_MEAN, TABLE_NOISE = 4.0, 0.8


def simulate_table(n=17_379, *, seed=None):
    """A synthetic table with the columns of the UCI Bike Sharing hourly table that
    docs/tables.md uses (``yr``, ``season``, ``weathersit``, ``workingday``, ``temp``, ``hum``,
    ``windspeed``, ``cnt``), for examples that must run without that file: ``temp``, ``hum``,
    ``windspeed`` uniform on [0, 1], ``yr`` and ``workingday`` 0/1, ``season`` and
    ``weathersit`` in 1..4 (weathersit mostly 1), and ``cnt`` from the log-linear model
    :data:`TABLE_EFFECTS`. Returns a pandas DataFrame of n rows (``bayesdp simulate --table``
    writes it as CSV)."""
    import pandas as pd

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise BayesdpInputError(f"n must be a whole number >= 1, got {n!r}")
    rng = np.random.default_rng(check_seed(seed))
    t = pd.DataFrame({
        "yr": rng.integers(0, 2, n),
        "season": rng.integers(1, 5, n),
        "weathersit": rng.choice([1, 2, 3, 4], n, p=[0.65, 0.26, 0.085, 0.005]),
        "workingday": rng.integers(0, 2, n),
        "temp": rng.random(n), "hum": rng.random(n), "windspeed": rng.random(n) * 0.8,
    })
    e = TABLE_EFFECTS
    log_cnt = (TABLE_MEAN + sum(e[c] * (t[c] - 0.5) for c in ("temp", "hum", "windspeed"))
               + e["workingday"] * t["workingday"]
               + np.asarray(e["season"])[t["season"] - 1]
               + np.asarray(e["weathersit"])[t["weathersit"] - 1]
               + TABLE_NOISE * rng.standard_normal(n))
    t["cnt"] = np.clip(np.round(np.expm1(log_cnt)), 0, 1000).astype(int)
    return t
