"""DP release of summary statistics, the release object, and its file format.

Each data holder j releases once (paper eqs. 2-3)

    S_hat_j = X_j^T X_j + sigma_s M_j,   M_j symmetric, upper triangle incl. diagonal iid N(0, 1)
    z_hat_j = X_j^T y_j + sigma_z v_j,   v_j ~ N(0, I_d)

with sigma_s = sigma_z = Delta_sz * sigma(eps, delta) (see :mod:`bayesdp.privacy`). Rows are
clipped to the public bounds before the statistics are formed, so the sensitivity is the one
actually enforced. The :class:`Release` object is what every other part of bayesdp takes; its
JSON file format is specified in ``docs/release-format.md``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from . import accounting, privacy, secure_noise
from .releases import layout
from .errors import BayesdpInputError, CombineError, ReleaseFormatError, check_seed

FORMAT_NAME = "bayesdp-release"
INTERCEPT_NAME = "intercept"
"""Name of the first feature of a release with an intercept (appendix B.2): theta[0]."""
FORMAT_VERSION = 1

NOISE_M = "symmetric; upper triangle including the diagonal iid N(0, 1), lower triangle mirrored"
NOISE_V = "iid N(0, 1) per coordinate"

NOISES = ("float", "secure")
"""``release(..., noise=...)``: "float" (numpy's PCG64 Gaussian, seedable) or "secure" (the
discrete Gaussian on a grid from the OS CSPRNG, :mod:`bayesdp.secure_noise`)."""

NOISE_MECHANISMS = ("gaussian", secure_noise.MECHANISM)

DATA_BOUNDS_WARNING = (
    "bounds='data': B_x and B_y are read off the data, so the noise scale depends on the data and "
    "the release is NOT differentially private. It is flagged private_bounds=False."
)


def _version():
    from . import __version__

    return __version__


@dataclasses.dataclass(frozen=True, eq=False)
class Release:
    """Noisy summary statistics of J data holders, with everything an analyst needs.

    Arrays: ``S_hat`` (J, d, d) symmetric, ``z_hat`` (J, d), ``n`` (J,) row counts, ``sigma_s`` and
    ``sigma_z`` (J,) noise standard deviations. ``noise_cov`` (J, D, D), D = d(d+1)/2 + d, is an
    optional general Gaussian noise covariance over [vech(S) (upper triangle, row-major), z]; when
    it is None the noise is the iid design of eqs. (2)-(3). ``yty_hat`` / ``sigma_yty`` are the
    optional noisy y^T y of appendix C.1 (only MCMC-B&S uses them).

    ``intercept`` (appendix B.2): the rows were [1, x]; the first feature is named "intercept",
    S_hat_j[0, 0] is n_j + noise, S_hat_j[0, 1:] is sum x + noise and z_hat_j[0] sum y + noise.
    ``average_rows`` = k > 1 (appendix B.1): each holder released the statistics of its rows
    summed in random groups of k and divided by sqrt(k); then ``n`` counts the groups (the
    Wishart degrees of freedom of normalX) and ``n_rows`` the rows the holder had.

    ``privacy_cost``: the cost parts, one per mechanism run on the holders' rows (a tuple of
    JSON dicts, :mod:`bayesdp.accounting`); None derives the statistics part from ``epsilon``,
    ``delta``, the sigmas and ``sensitivity`` (:func:`bayesdp.accounting.derive_cost`).
    ``noise_mechanism``: "gaussian" (float noise) or "discrete_gaussian" (``noise="secure"``:
    every released number is a multiple of ``noise_grid``, a power of two; docs/privacy.md 10).
    With ``bounds="private"`` the first part is the "bounds" estimate's (its
    ``{"name": "bounds", "mechanism": "exponential", ...}``) and the statistics part follows;
    their basic composition is the release's (epsilon, delta) (docs/privacy.md, "Private
    bounds").
    """

    S_hat: np.ndarray
    z_hat: np.ndarray
    n: np.ndarray
    sigma_s: np.ndarray
    sigma_z: np.ndarray
    feature_names: tuple = ()
    holder_names: tuple = ()
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    calibration: Optional[str] = None
    sensitivity: Optional[float] = None
    bounds: Optional[tuple] = None
    private_bounds: bool = True
    seeded: bool = False
    n_clipped: Optional[np.ndarray] = None
    yty_hat: Optional[np.ndarray] = None
    sigma_yty: Optional[np.ndarray] = None
    noise_cov: Optional[np.ndarray] = None
    dp_claim_valid: bool = True
    dp_claim_note: str = ""
    provenance: dict = dataclasses.field(default_factory=dict)
    intercept: bool = False
    average_rows: int = 1
    n_rows: Optional[np.ndarray] = None
    privacy_cost: Optional[tuple] = None
    noise_mechanism: str = "gaussian"
    noise_grid: Optional[float] = None

    def __post_init__(self):
        S = _float_array("S_hat", self.S_hat, ndim=3)
        J, d, d2 = S.shape
        if d != d2 or J < 1 or d < 1:
            raise BayesdpInputError(f"S_hat must have shape (J, d, d) with J, d >= 1, got {S.shape}")
        scale = max(1.0, float(np.max(np.abs(S))))
        asym_j = np.max(np.abs(0.5 * S - 0.5 * np.swapaxes(S, 1, 2)), axis=(1, 2))
        if float(np.max(asym_j)) > 0.5e-12 * scale:
            raise BayesdpInputError(
                f"S_hat must be symmetric; max |S_hat - S_hat^T| = {2 * float(np.max(asym_j)):.3g} "
                f"(holder {int(np.argmax(asym_j))})"
            )
        S = 0.5 * S + 0.5 * np.swapaxes(S, 1, 2)  # halves first: no overflow near the float limit
        z = _float_array("z_hat", self.z_hat, shape=(J, d))
        n = _whole_numbers("n", self.n, J)
        sig_s = _float_array("sigma_s", np.broadcast_to(self.sigma_s, (J,)), shape=(J,))
        sig_z = _float_array("sigma_z", np.broadcast_to(self.sigma_z, (J,)), shape=(J,))
        if np.any(sig_s < 0) or np.any(sig_z < 0):
            raise BayesdpInputError("sigma_s and sigma_z must be >= 0")
        names = tuple(str(f) for f in self.feature_names) or tuple(f"x{i}" for i in range(d))
        if len(names) != d or len(set(names)) != d:
            raise BayesdpInputError(f"feature_names must be {d} distinct names, got {names!r}")
        holders = tuple(str(h) for h in self.holder_names) or tuple(str(j) for j in range(J))
        if len(holders) != J or len(set(holders)) != J:
            raise BayesdpInputError(f"holder_names must be {J} distinct names, got {holders!r}")
        if self.epsilon is not None or self.delta is not None:
            privacy.check_epsilon_delta(self.epsilon, self.delta)
        if not isinstance(self.intercept, (bool, np.bool_)):
            raise BayesdpInputError(f"intercept must be True or False, got {self.intercept!r}")
        if self.intercept and d < 2:
            raise BayesdpInputError(f"intercept: a release with an intercept has the intercept "
                                    f"and at least one feature (d >= 2), got d={d}")
        if self.intercept and names[0] != INTERCEPT_NAME:
            raise BayesdpInputError(
                f"feature_names: a release with an intercept names its first feature "
                f"{INTERCEPT_NAME!r}, got {names[0]!r}")
        k = self.average_rows
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise BayesdpInputError(f"average_rows must be a whole number >= 1, got {k!r}")
        if self.calibration is not None and self.calibration not in privacy.CALIBRATIONS:
            raise BayesdpInputError(
                f"calibration must be one of {privacy.CALIBRATIONS}, got {self.calibration!r}"
            )
        bounds = None if self.bounds is None else privacy.check_bounds(self.bounds)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("S_hat", S)
        set_("z_hat", z)
        set_("n", n)
        set_("sigma_s", sig_s)
        set_("sigma_z", sig_z)
        set_("feature_names", names)
        set_("holder_names", holders)
        set_("bounds", bounds)
        set_("intercept", bool(self.intercept))
        set_("average_rows", int(k))
        if self.n_rows is not None:
            rows = _whole_numbers("n_rows", self.n_rows, J)
            if np.any(rows // int(k) != n):
                raise BayesdpInputError(
                    f"n_rows: with average_rows={int(k)} each holder's n_j must be its number of "
                    f"groups floor(n_rows_j / {int(k)}); got n={n.tolist()}, "
                    f"n_rows={rows.tolist()}")
            set_("n_rows", rows)
        if self.n_clipped is not None:
            try:
                nc = _whole_numbers("n_clipped", self.n_clipped, J, minimum=0)
            except BayesdpInputError:
                nc = None
            # clipping counts rows: at most n_j, or n_rows_j when rows were averaged
            top = self.n_rows if self.n_rows is not None else (n if int(k) == 1 else None)
            if nc is None or (top is not None and np.any(nc > top)):
                raise BayesdpInputError(
                    f"n_clipped must be {J} whole numbers with 0 <= n_clipped_j <= "
                    f"{'n_j' if int(k) == 1 else 'n_rows_j'}, got {self.n_clipped!r}"
                )
            set_("n_clipped", nc)
        if self.sensitivity is not None:
            try:
                sens = math.nan if isinstance(self.sensitivity, (bool, str)) \
                    else float(self.sensitivity)
            except (TypeError, ValueError):
                sens = math.nan
            if not math.isfinite(sens) or sens <= 0:
                raise BayesdpInputError(
                    f"sensitivity must be a finite number > 0, got {self.sensitivity!r}"
                )
            set_("sensitivity", sens)
        if self.yty_hat is not None:
            yty = _float_array("yty_hat", self.yty_hat, shape=(J,))
            sy = self.sigma_yty if self.sigma_yty is not None else 0.0
            try:  # broadcast the value given, not a converted copy of it
                sy = np.broadcast_to(np.asarray(sy, dtype=object), (J,))
            except ValueError:
                raise BayesdpInputError(
                    f"sigma_yty must be one number or {J} numbers, got {self.sigma_yty!r}") from None
            sy = _float_array("sigma_yty", sy, shape=(J,))
            if np.any(sy < 0):
                raise BayesdpInputError(
                    f"sigma_yty must be >= 0, got {sy.tolist()} (holder {int(np.argmin(sy))})")
            set_("yty_hat", yty)
            set_("sigma_yty", sy)
        elif self.sigma_yty is not None:
            raise BayesdpInputError("sigma_yty is given without yty_hat")
        if self.noise_cov is not None:
            D = d * (d + 1) // 2 + d
            cov = _float_array("noise_cov", self.noise_cov, shape=(J, D, D))
            asym = np.max(np.abs(0.5 * cov - 0.5 * np.swapaxes(cov, 1, 2)), axis=(1, 2))
            if float(np.max(asym)) > 0.5e-10 * max(1.0, float(np.max(np.abs(cov)))):
                raise BayesdpInputError(
                    f"noise_cov must be symmetric for every holder (holder {int(np.argmax(asym))}"
                    f" has max |C - C^T| = {2 * float(np.max(asym)):.3g})")
            cov = 0.5 * cov + 0.5 * np.swapaxes(cov, 1, 2)
            for j in range(J):
                w = np.linalg.eigvalsh(cov[j])
                tol = NOISE_COV_PSD_RTOL * max(float(np.max(np.abs(w))), np.finfo(float).tiny)
                if w[0] < -tol:
                    raise BayesdpInputError(
                        f"noise_cov of holder {j} is not positive semi-definite (smallest "
                        f"eigenvalue {w[0]:.3g}, allowed >= -{tol:.3g}); a covariance must be PSD")
            set_("noise_cov", cov)
        self._check_noise_mechanism()
        set_("provenance", dict(self.provenance))
        if self.privacy_cost is None:
            set_("privacy_cost", accounting.derive_cost(self))
        else:
            parts = self.privacy_cost
            if isinstance(parts, dict) or not isinstance(parts, (list, tuple)) or not parts:
                raise BayesdpInputError(
                    f"privacy_cost must be a non-empty list of cost parts, got {parts!r}")
            set_("privacy_cost", tuple(accounting.check_part(p, f"privacy_cost[{i}]", holders)
                                       for i, p in enumerate(parts)))

    def _check_noise_mechanism(self):
        """``noise_mechanism`` is known; a discrete Gaussian release has a power-of-two grid,
        every released number on it, and no general noise covariance."""
        mech = self.noise_mechanism
        if mech not in NOISE_MECHANISMS:
            raise BayesdpInputError(f"noise_mechanism must be one of {NOISE_MECHANISMS}, got "
                                    f"{mech!r}")
        if mech == "gaussian":
            if self.noise_grid is not None:
                raise BayesdpInputError("noise_grid is given for float Gaussian noise; it belongs "
                                        "to noise_mechanism='discrete_gaussian'")
            return
        g = self.noise_grid
        try:
            g = math.nan if isinstance(g, (bool, str)) else float(g)
        except (TypeError, ValueError):
            g = math.nan
        if not (math.isfinite(g) and g > 0 and math.frexp(g)[0] == 0.5):
            raise BayesdpInputError(
                f"noise_grid must be a power of two > 0 for noise_mechanism='discrete_gaussian', "
                f"got {self.noise_grid!r}")
        if self.noise_cov is not None:
            raise BayesdpInputError("noise_cov: a discrete Gaussian release has iid noise")
        for name in ("S_hat", "z_hat", "yty_hat"):
            a = getattr(self, name)
            if a is not None and not np.all(np.floor(a / g) == a / g):
                raise BayesdpInputError(
                    f"{name}: a discrete Gaussian release has every value on its grid "
                    f"(a multiple of noise_grid = {g!r}); this one has values off the grid")
        object.__setattr__(self, "noise_grid", g)

    # -- shape ---------------------------------------------------------------------------------
    @property
    def J(self) -> int:
        """Number of data holders."""
        return int(self.S_hat.shape[0])

    @property
    def d(self) -> int:
        """Number of features."""
        return int(self.S_hat.shape[1])

    @property
    def n_total(self) -> int:
        return int(self.n.sum())

    @property
    def bounds_part(self):
        """The "bounds" part of ``privacy_cost`` (bounds estimated with DP), or None."""
        return next((p for p in self.privacy_cost if p.get("name") == "bounds"), None)

    def __repr__(self):
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        dlt = "none" if self.delta is None else f"{self.delta:g}"
        flags = []
        if not self.private_bounds:
            flags.append("NOT PRIVATE: bounds read off the data")
        if not self.dp_claim_valid:
            flags.append("DP CLAIM INVALID")
        if self.seeded:
            flags.append("seeded noise (for experiments only)")
        if self.noise_mechanism == secure_noise.MECHANISM:
            flags.append(f"secure noise: discrete Gaussian on the grid {self.noise_grid:g}")
        part = self.bounds_part
        if part is not None:
            flags.append(f"bounds estimated privately with eps={part['epsilon']:g}")
        extra = f" [{'; '.join(flags)}]" if flags else ""
        shape = ", intercept" if self.intercept else ""
        if self.average_rows > 1:
            shape += f", average_rows={self.average_rows} (n = groups)"
        return (
            f"Release(J={self.J}, d={self.d}{shape}, n={self.n.tolist()}, epsilon={eps}, delta={dlt}, "
            f"calibration={self.calibration}, sigma_s={_fmt(self.sigma_s)}, "
            f"sigma_z={_fmt(self.sigma_z)}){extra}"
        )

    # -- files ---------------------------------------------------------------------------------
    def to_dict(self, include_clip_counts=False) -> dict:
        """The JSON-ready dictionary of the release file format (docs/release-format.md).

        ``n_clipped`` is an exact count of the holder's rows, not covered by the DP guarantee,
        so it is left out unless ``include_clip_counts`` is true.
        """
        holders = []
        for j in range(self.J):
            h = {
                "name": self.holder_names[j],
                "n": int(self.n[j]),
                "S_hat": self.S_hat[j].tolist(),
                "z_hat": self.z_hat[j].tolist(),
                "sigma_s": float(self.sigma_s[j]),
                "sigma_z": float(self.sigma_z[j]),
            }
            if self.n_rows is not None:
                h["n_rows"] = int(self.n_rows[j])
            if include_clip_counts and self.n_clipped is not None:
                h["n_clipped"] = int(self.n_clipped[j])
            if self.yty_hat is not None:
                h["yty_hat"] = float(self.yty_hat[j])
                h["sigma_yty"] = float(self.sigma_yty[j])
            if self.noise_cov is not None:
                h["noise_cov"] = self.noise_cov[j].tolist()
            holders.append(h)
        shape = {}
        if self.intercept:
            shape["intercept"] = True
        if self.average_rows > 1:
            shape["average_rows"] = int(self.average_rows)
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "d": self.d,
            "feature_names": list(self.feature_names),
            **shape,
            "holders": holders,
            "privacy": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "calibration": self.calibration,
                "sensitivity": self.sensitivity,
                "bounds": None if self.bounds is None else {"x": self.bounds[0], "y": self.bounds[1]},
                "private_bounds": bool(self.private_bounds),
                "neighbouring": privacy.NEIGHBOURING,
                "dp_claim_valid": bool(self.dp_claim_valid),
                "dp_claim_note": self.dp_claim_note,
                "cost": {"parts": [dict(p) for p in self.privacy_cost],
                         "total": accounting.total_cost(self.privacy_cost, self.holder_names)},
            },
            "noise": self._noise_section(),
            "provenance": {**self.provenance, "seeded": bool(self.seeded)},
        }

    def _noise_section(self) -> dict:
        if self.noise_mechanism == secure_noise.MECHANISM:
            return {
                "mechanism": secure_noise.MECHANISM,
                "grid": self.noise_grid,
                "M": "symmetric; upper triangle including the diagonal iid N_Z(0, s^2) on the "
                     "integers times grid (s = sigma_s / grid), lower triangle mirrored",
                "v": "iid N_Z(0, s^2) on the integers times grid per coordinate",
                "covariance": "iid: sigma_s on the upper triangle of S incl. diagonal, sigma_z "
                              "on z (sigma is the discrete Gaussian's scale parameter)",
                "rounding": "each row's contribution rounded to the nearest multiple of grid "
                            "before the exact integer sum; privacy.sensitivity includes the "
                            "rounding: Delta (1 + 1e-9) + grid sqrt(D)",
                "sampler": "exact discrete Gaussian (Canonne, Kamath & Steinke 2020, "
                           "Algorithms 1-3) driven by secrets.randbelow (the operating "
                           "system's CSPRNG); not seedable",
            }
        return {
            "mechanism": "gaussian",
            "M": NOISE_M,
            "v": NOISE_V,
            "covariance": "per holder noise_cov over [vech(S), z]"
            if self.noise_cov is not None
            else "iid: sigma_s on the upper triangle of S incl. diagonal, sigma_z on z",
        }

    def save(self, path, include_clip_counts=False) -> Path:
        """Write the release to ``path`` as JSON, atomically (no partial file on failure).

        The exact clipping counts stay out of the file unless ``include_clip_counts`` is true
        (they are not differentially private; see docs/privacy.md).
        """
        text = json.dumps(self.to_dict(include_clip_counts), indent=1, allow_nan=False)
        return write_text_atomic(path, text + "\n")

    @classmethod
    def from_dict(cls, doc: dict) -> "Release":
        return _release_from_dict(doc)


def _fmt(a):
    a = np.asarray(a)
    return f"{a[0]:.4g}" if np.all(a == a[0]) else "[" + ", ".join(f"{v:.4g}" for v in a) + "]"


MAX_ABS = 1e150
"""Largest magnitude accepted for a number in a release: squares and products of the statistics
(S theta, sigma^2, S C S) must stay finite in float64 (largest about 1.8e308)."""

NOISE_COV_PSD_RTOL = 1e-10
"""``noise_cov`` eigenvalues may be negative by rounding only: >= -NOISE_COV_PSD_RTOL * max |eig|."""

MAX_COUNT = 2**53
"""Largest row count accepted (exact in float64)."""


def _as_array(name, value):
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise BayesdpInputError(f"{name} must be a rectangular array of numbers") from None


def _float_array(name, value, *, ndim=None, shape=None):
    a = _as_array(name, value)
    if a.dtype == bool or (a.dtype == object and any(isinstance(v, (bool, np.bool_, str, bytes))
                                                     for v in a.ravel())):
        raise BayesdpInputError(f"{name} must be an array of numbers (not booleans or strings)")
    try:
        with np.errstate(over="ignore"):
            a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise BayesdpInputError(f"{name} must be an array of numbers") from None
    if ndim is not None and a.ndim != ndim:
        raise BayesdpInputError(f"{name} must be a {ndim}-d array, got shape {a.shape}")
    if shape is not None and a.shape != tuple(shape):
        raise BayesdpInputError(f"{name} must have shape {tuple(shape)}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise BayesdpInputError(f"{name} contains NaN or infinite values")
    if a.size and float(np.max(np.abs(a))) > MAX_ABS:
        raise BayesdpInputError(
            f"{name} has a value of magnitude {float(np.max(np.abs(a))):.3g}; bayesdp accepts "
            f"magnitudes up to {MAX_ABS:g} (larger ones overflow float64 in the inference)")
    return a


def _whole_numbers(name, value, J, minimum=1):
    """``J`` whole numbers >= ``minimum`` and <= MAX_COUNT (no booleans) as an int64 array."""
    a = _as_array(name, value)
    ok = a.shape == (J,) and a.dtype != bool and not (
        a.dtype == object and any(isinstance(v, (bool, np.bool_, str, bytes)) for v in a.ravel()))
    if ok:
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                f = a.astype(np.float64)
        except (TypeError, ValueError, OverflowError):
            ok = False
    if ok:
        ok = bool(np.all(np.isfinite(f)) and np.all(f == np.round(f)))
    if not ok:
        raise BayesdpInputError(f"{name} must be {J} whole numbers (one per holder), got {value!r}")
    if np.any(f > MAX_COUNT):
        raise BayesdpInputError(f"{name}: counts above 2**53 are not supported, got {value!r}")
    out = f.astype(np.int64)
    if np.any(out < minimum):
        raise BayesdpInputError(
            f"{name}: every holder needs {name}_j >= {minimum}" + (" rows" if name == "n" else "")
            + f", got {out.tolist()}")
    return out


def write_text_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise BayesdpInputError(f"path: folder {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise BayesdpInputError(f"path: {str(path)!r} is a folder; give a file name to write")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it owner-only; a release is for sharing
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# -- reading ---------------------------------------------------------------------------------------


def load_release(path) -> Release:
    """Read a release file written by :meth:`Release.save` or by hand (docs/release-format.md)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BayesdpInputError(f"release file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise BayesdpInputError(f"release file {str(path)!r} is a folder, not a file") from None
    except OSError as exc:
        raise BayesdpInputError(f"release file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReleaseFormatError(f"{path}: not a UTF-8 text file") from None
    try:
        doc = json.loads(text)  # NaN/Infinity/1e999 parse to non-finite floats, refused below
    except json.JSONDecodeError as exc:
        raise ReleaseFormatError(
            f"{path}: not valid JSON (truncated or corrupted?) at line {exc.lineno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ReleaseFormatError(f"{path}: JSON nested too deeply (a release file is at most "
                                 "a few levels deep)") from None
    where = _non_finite_field(doc)
    if where is not None:
        raise ReleaseFormatError(
            f"{path}: field {where} is not a finite number (NaN and Infinity are not allowed)"
        )
    try:
        return _release_from_dict(doc)
    except ReleaseFormatError as exc:
        raise ReleaseFormatError(f"{path}: {exc}") from None
    except BayesdpInputError as exc:
        raise ReleaseFormatError(f"{path}: {exc}") from None


def _non_finite_field(obj, where=""):
    """JSON path (e.g. ``holders[0].S_hat[1][2]``) of the first non-finite number, or None.

    Iterative (depth-first, in document order), so nesting depth cannot exhaust the stack."""
    stack = [(obj, where)]
    while stack:
        x, w = stack.pop()
        if isinstance(x, float):
            if not math.isfinite(x):
                return w or "(top level)"
        elif isinstance(x, dict):
            items = [(f"{w}.{k}" if w else str(k), v) for k, v in x.items()]
            stack.extend(((v, kw) for kw, v in reversed(items)))
        elif isinstance(x, list):
            stack.extend(((x[i], f"{w}[{i}]") for i in range(len(x) - 1, -1, -1)))
    return None


def _flag(doc, key, default, where):
    """An optional JSON boolean (true/false only: a string "false" must not read as True)."""
    v = doc.get(key, default) if isinstance(doc, dict) else default
    if not isinstance(v, bool):
        raise ReleaseFormatError(f"field {where}{key} must be true or false, got {v!r}")
    return v


def _need(doc, key, where, kind=None):
    if not isinstance(doc, dict) or key not in doc:
        raise ReleaseFormatError(f"missing field {where}{key!r}")
    v = doc[key]
    if kind is not None and (not isinstance(v, kind) or (isinstance(v, bool) and kind is int)):
        raise ReleaseFormatError(f"field {where}{key!r} has the wrong type ({type(v).__name__})")
    return v


def _release_from_dict(doc) -> Release:
    if not isinstance(doc, dict):
        raise ReleaseFormatError("top level must be a JSON object")
    if doc.get("format") != FORMAT_NAME:
        raise ReleaseFormatError(f"field 'format' must be {FORMAT_NAME!r}, got {doc.get('format')!r}")
    version = _need(doc, "format_version", "", int)
    if version > FORMAT_VERSION or version < 1:
        raise ReleaseFormatError(
            f"format_version {version} is not supported (this bayesdp reads 1..{FORMAT_VERSION})"
        )
    d = _need(doc, "d", "", int)
    if d < 1:
        raise ReleaseFormatError(f"field 'd' must be >= 1, got {d}")
    names = doc.get("feature_names") or [f"x{i}" for i in range(d)]
    if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
        raise ReleaseFormatError(f"field 'feature_names' must be a list of {d} strings, got {names!r}")
    holders = _need(doc, "holders", "", list)
    if not holders:
        raise ReleaseFormatError("field 'holders' is empty")
    intercept = _flag(doc, "intercept", False, "")
    k = doc.get("average_rows", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ReleaseFormatError(f"field 'average_rows' must be a whole number >= 1, got {k!r}")
    S, z, n, ss, sz, hn = [], [], [], [], [], []
    clipped, yty, syty, cov, rows = [], [], [], [], []
    for j, h in enumerate(holders):
        w = f"holders[{j}]."
        Sj = _number_array(_need(h, "S_hat", w, list), w + "S_hat", 2)
        zj = _number_array(_need(h, "z_hat", w, list), w + "z_hat", 1)
        if Sj.shape != (d, d):
            raise ReleaseFormatError(f"{w}S_hat must be {d} x {d}, got shape {Sj.shape}")
        if zj.shape != (d,):
            raise ReleaseFormatError(f"{w}z_hat must have length {d}, got shape {zj.shape}")
        S.append(Sj)
        z.append(zj)
        n.append(_count(_need(h, "n", w), w + "n"))
        ss.append(_number(_need(h, "sigma_s", w), w + "sigma_s"))
        sz.append(_number(_need(h, "sigma_z", w), w + "sigma_z"))
        hn.append(str(h.get("name", j)))
        clipped.append(None if h.get("n_clipped") is None
                       else _count(h["n_clipped"], w + "n_clipped", minimum=0))
        rows.append(None if h.get("n_rows") is None else _count(h["n_rows"], w + "n_rows"))
        yty.append(None if h.get("yty_hat") is None else _number(h["yty_hat"], w + "yty_hat"))
        if h.get("yty_hat") is not None:
            syty.append(_number(_need(h, "sigma_yty", w), w + "sigma_yty"))
        elif h.get("sigma_yty") is not None:
            raise ReleaseFormatError(f"{w}sigma_yty is given without {w}yty_hat")
        cov.append(None if h.get("noise_cov") is None
                   else _number_array(h["noise_cov"], w + "noise_cov", 2))
    pr = doc.get("privacy") or {}
    if not isinstance(pr, dict) or not isinstance(doc.get("provenance") or {}, dict):
        raise ReleaseFormatError("fields 'privacy' and 'provenance' must be JSON objects")
    prov = dict(doc.get("provenance") or {})
    seeded = _flag(prov, "seeded", False, "provenance.")
    prov.pop("seeded", None)
    b = pr.get("bounds")
    bounds = None if b is None else (
        _number(_need(b, "x", "privacy.bounds."), "privacy.bounds.x"),
        _number(_need(b, "y", "privacy.bounds."), "privacy.bounds.y"))
    for key in ("epsilon", "delta", "sensitivity"):
        if pr.get(key) is not None:
            _number(pr[key], "privacy." + key)
    if pr.get("calibration") is not None and not isinstance(pr["calibration"], str):
        raise ReleaseFormatError(
            f"privacy.calibration must be a string, got {pr['calibration']!r}")
    cost = pr.get("cost")
    parts = None
    if cost is not None:
        if not isinstance(cost, dict) or not isinstance(cost.get("parts"), list) \
                or not cost["parts"]:
            raise ReleaseFormatError("privacy.cost must be an object with a non-empty list "
                                     "'parts'")
        parts = []
        for i, p in enumerate(cost["parts"]):
            try:
                parts.append(accounting.check_part(p, f"privacy.cost.parts[{i}]", hn))
            except BayesdpInputError as exc:
                raise ReleaseFormatError(str(exc)) from None
    claim_valid = _flag(pr, "dp_claim_valid", True, "privacy.")
    claim_note = str(pr.get("dp_claim_note", ""))
    mech, grid = _noise_from_dict(doc.get("noise"))
    has = lambda lst: all(v is not None for v in lst)  # noqa: E731
    if any(v is not None for v in yty) and not has(yty):
        raise ReleaseFormatError("yty_hat must be given for every holder or for none")
    if any(v is not None for v in cov) and not has(cov):
        raise ReleaseFormatError("noise_cov must be given for every holder or for none")
    if any(v is not None for v in clipped) and not has(clipped):
        raise ReleaseFormatError("n_clipped must be given for every holder or for none")
    if any(v is not None for v in rows) and not has(rows):
        raise ReleaseFormatError("n_rows must be given for every holder or for none")
    return Release(
        S_hat=np.stack(S),
        z_hat=np.stack(z),
        n=np.array(n),
        sigma_s=np.array(ss),
        sigma_z=np.array(sz),
        feature_names=tuple(names),
        holder_names=tuple(hn),
        epsilon=pr.get("epsilon"),
        delta=pr.get("delta"),
        calibration=pr.get("calibration"),
        sensitivity=pr.get("sensitivity"),
        bounds=bounds,
        private_bounds=_flag(pr, "private_bounds", True, "privacy."),
        seeded=seeded,
        n_clipped=np.array(clipped) if has(clipped) else None,
        yty_hat=np.array(yty, dtype=float) if has(yty) else None,
        sigma_yty=np.array(syty, dtype=float) if has(yty) else None,
        noise_cov=np.stack(cov) if has(cov) and len({c.shape for c in cov}) == 1 else (
            None if not has(cov) else _ragged("noise_cov")),
        dp_claim_valid=claim_valid,
        dp_claim_note=claim_note,
        provenance=prov,
        intercept=intercept,
        average_rows=k,
        n_rows=np.array(rows) if has(rows) else None,
        privacy_cost=parts,
        noise_mechanism=mech,
        noise_grid=grid,
    )


def _noise_from_dict(noise):
    """(mechanism, grid) from the file's "noise" section. Only "discrete_gaussian" is read (it
    needs ``noise.grid``); anything else, or no section (files before the secure mode, or
    written by hand, where the section was informational), is float Gaussian noise."""
    if not isinstance(noise, dict) or noise.get("mechanism") != secure_noise.MECHANISM:
        return "gaussian", None
    return secure_noise.MECHANISM, _number(_need(noise, "grid", "noise."), "noise.grid")


def _number_array(v, where, ndim):
    """A rectangular ``ndim``-deep JSON list of numbers (not booleans, strings or null) with
    magnitudes up to MAX_ABS, as a float64 array; errors name the JSON path of the bad entry."""
    stack = [(v, where, 0)]
    while stack:  # iterative: deeply nested input must not hit Python's recursion limit
        x, w, depth = stack.pop()
        if isinstance(x, list):
            if depth >= ndim:
                raise ReleaseFormatError(f"{where} must be a {ndim}-d array of numbers; {w} is a "
                                         "list where a number belongs")
            stack.extend((x[i], f"{w}[{i}]", depth + 1) for i in range(len(x) - 1, -1, -1))
        elif depth < ndim:
            raise ReleaseFormatError(f"{where} must be a {ndim}-d array of numbers; {w} is "
                                     f"{x!r}, not a list")
        else:
            _number(x, w)
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ReleaseFormatError(f"{where} must be a rectangular array of numbers "
                                 "(rows of equal length)") from None
    if a.ndim != ndim:
        raise ReleaseFormatError(f"{where} must be a rectangular {ndim}-d array of numbers")
    return a


def _number(v, where):
    """A JSON number (not a boolean) of magnitude at most MAX_ABS, as a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ReleaseFormatError(f"{where} must be a number, got {v!r}")
    if abs(v) > MAX_ABS:
        raise ReleaseFormatError(
            f"{where} = {_short(v)} is too large: bayesdp accepts "
            f"magnitudes up to {MAX_ABS:g} (larger ones overflow float64 in the inference)")
    return float(v)


def _short(v):
    return f"{v:.3g}" if isinstance(v, float) else f"(a {len(str(abs(v)))}-digit integer)"


def _count(v, where, minimum=1):
    """A JSON whole number (not a boolean) in [minimum, MAX_COUNT]."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ReleaseFormatError(f"{where} must be a whole number, got {v!r}")
    if v > MAX_COUNT:
        raise ReleaseFormatError(f"{where} must be at most 2**53, got {_short(v)}")
    if v < minimum:
        raise ReleaseFormatError(
            f"{where} must be >= {minimum}" + (" (every holder needs n_j >= 1 rows)"
                                               if minimum == 1 else "") + f", got {v}")
    return v


def _ragged(field):
    raise ReleaseFormatError(f"{field} must have the same shape for every holder")


_DEFAULT_HOLDER_NAME = re.compile(r"\d+(:\d+)*")


def _is_default_holder_name(name) -> bool:
    """True for the names bayesdp makes up when none is given: "0", "1", ... (one per holder of
    a release) and "k:j" (made unique by an earlier combine)."""
    return _DEFAULT_HOLDER_NAME.fullmatch(str(name)) is not None


def combine_releases(*releases) -> Release:
    """Put per-holder releases together into one analysis set.

    Refuses releases whose d, feature names, bounds, privacy parameters, calibration or noise
    design differ. Holders hold disjoint rows, so the union keeps each holder's (eps, delta)
    guarantee (parallel composition).

    Duplicates are refused with a :class:`CombineError` naming them, because counting one
    holder twice halves its noise in the posterior and double-counts its rows:

    - identical statistics: two holders (in any of the inputs) whose ``S_hat`` and ``z_hat`` are
      equal. Independent noise makes this impossible for different holders, so it is always the
      same release given twice (e.g. ``bayesdp combine a.json a.json``), whatever the names say.
    - the same holder name in two inputs, when it is a name someone chose (``hospital_a``).
      Names bayesdp makes up when none is given - "0", "1", ... and "k:j" from an earlier
      combine - carry no identity: when such names clash between inputs, every made-up name is
      renamed ``"<k>:<name>"``, k the position of its input, and the holders are kept.
    """
    rels = []
    labels = []
    for r in releases:
        for x in (r if isinstance(r, (list, tuple)) else [r]):
            rels.append(x)
            labels.append(f"release {len(labels)}" + (f" ({os.fspath(x)})"
                                                      if isinstance(x, (str, os.PathLike)) else ""))
    rels = [load_release(r) if isinstance(r, (str, os.PathLike)) else r for r in rels]
    if not rels:
        raise BayesdpInputError("combine_releases needs at least one release")
    first = rels[0]
    # holders that estimated their bounds privately (each from its own rows) have bounds of
    # their own; they combine when their costs have the same form (docs/privacy.md section 9)
    own_bounds = all(r.bounds_part is not None and r.bounds is not None for r in rels)
    for k, r in enumerate(rels[1:], start=1):
        for field in ("d", "feature_names", "intercept", "average_rows", "bounds", "epsilon",
                      "delta", "calibration", "noise_mechanism", "noise_grid", "sensitivity",
                      "private_bounds"):
            if own_bounds and field in ("bounds", "sensitivity"):
                continue
            a, b = getattr(first, field), getattr(r, field)
            if a != b:
                raise CombineError(
                    f"cannot combine: release {k} has {field}={b!r} but release 0 has {a!r}"
                )
        a, b = _cost_form(first), _cost_form(r)
        if own_bounds and a != b:
            raise CombineError(
                f"cannot combine: release {k} has privacy_cost parts {b} but release 0 has {a} "
                "(name, mechanism, epsilon, delta of each mechanism run on the rows)")
        for field in ("yty_hat", "noise_cov"):
            if (getattr(first, field) is None) != (getattr(r, field) is None):
                raise CombineError(f"cannot combine: {field} is present in some releases only")
    holders = [(k, h, r.S_hat[j], r.z_hat[j]) for k, r in enumerate(rels)
               for j, h in enumerate(r.holder_names)]
    seen = {}
    for k, h, S, z in holders:
        key = (S.tobytes(), z.tobytes())
        if key in seen:
            k0, h0 = seen[key]
            raise CombineError(
                f"cannot combine: holder {h!r} of {labels[k]} has the same statistics (S_hat and "
                f"z_hat) as holder {h0!r} of {labels[k0]}: the same holder's release is given "
                "twice, and counting it twice would double its rows and halve its noise")
        seen[key] = (k, h)
    owner = {}
    for k, h, _, _ in holders:
        if not _is_default_holder_name(h) and h in owner and owner[h] != k:
            raise CombineError(
                f"cannot combine: holder {h!r} is in {labels[owner[h]]} and in {labels[k]}; the "
                "same holder must not be counted twice (if these are different holders, give "
                "them different names, e.g. bayesdp release --holder NAME)")
        owner.setdefault(h, k)
    names = [h for _, h, _, _ in holders]
    if len(set(names)) != len(names):
        names = [f"{k}:{h}" if _is_default_holder_name(h) else h for k, h, _, _ in holders]
        if len(set(names)) != len(names):
            dup = sorted({h for h in names if names.count(h) > 1})
            raise CombineError(f"cannot combine: holder names {dup} are not unique after "
                               "renaming the default names as '<k>:<name>'; give the holders "
                               "distinct names")
    cat = lambda f: None if getattr(first, f) is None else np.concatenate([getattr(r, f) for r in rels])  # noqa: E731
    cost = _combined_cost(rels, names, labels)
    return dataclasses.replace(
        first,
        S_hat=np.concatenate([r.S_hat for r in rels]),
        z_hat=np.concatenate([r.z_hat for r in rels]),
        n=np.concatenate([r.n for r in rels]),
        sigma_s=np.concatenate([r.sigma_s for r in rels]),
        sigma_z=np.concatenate([r.sigma_z for r in rels]),
        holder_names=tuple(names),
        seeded=any(r.seeded for r in rels),
        n_clipped=None if any(r.n_clipped is None for r in rels) else np.concatenate([r.n_clipped for r in rels]),
        n_rows=None if any(r.n_rows is None for r in rels) else np.concatenate([r.n_rows for r in rels]),
        yty_hat=cat("yty_hat"),
        sigma_yty=cat("sigma_yty"),
        noise_cov=cat("noise_cov"),
        dp_claim_valid=all(r.dp_claim_valid for r in rels),
        dp_claim_note="; ".join(sorted({r.dp_claim_note for r in rels if r.dp_claim_note})),
        privacy_cost=cost,
        provenance={**first.provenance, "combined_from": len(rels)},
        **(_largest_bounds(rels) if own_bounds else {}),
    )


def _combined_cost(rels, names, labels):
    """The cost parts of combined releases. Holders hold disjoint rows, so the combined cost is
    the largest holder's (parallel composition), not the sum: equal costs are kept as they are;
    otherwise each part is tagged with the holders it applies to (``holders``) and the total
    is the maximum over holders (:mod:`bayesdp.accounting`). Costs under different
    neighbouring relations cannot be compared and are refused."""
    ref = None
    for k, r in enumerate(rels):
        for i, p in enumerate(r.privacy_cost):
            if ref is None:
                ref = (p["neighbouring"], k, i)
            elif p["neighbouring"] != ref[0]:
                raise CombineError(
                    f"cannot combine: {labels[k]} has privacy.cost.parts[{i}].neighbouring = "
                    f"{p['neighbouring']!r} but {labels[ref[1]]} has {ref[0]!r} (parts[{ref[2]}]); "
                    "costs under different neighbouring relations cannot be composed")
    keys = {json.dumps(list(r.privacy_cost), sort_keys=True) for r in rels}
    if len(keys) == 1 and not any("holders" in p for p in rels[0].privacy_cost):
        return rels[0].privacy_cost
    parts, pos = [], 0
    for r in rels:
        new = dict(zip(r.holder_names, names[pos:pos + r.J]))
        pos += r.J
        for p in r.privacy_cost:
            parts.append({**p, "holders": [new[h] for h in p.get("holders", r.holder_names)]})
    return tuple(parts)


def _cost_form(rel):
    """What must agree between releases to combine them: each cost part's name, mechanism,
    epsilon and delta (the noise and the bounds themselves may differ by holder)."""
    return [(p.get("name"), p.get("mechanism"), p.get("epsilon"), p.get("delta"))
            for p in rel.privacy_cost]


def _largest_bounds(rels):
    """Fields of a combination of releases with privately estimated bounds of their own: the
    largest bounds and sensitivity over them (every holder's clipped rows satisfy those bounds;
    each holder's own noise stays in its sigma_s, sigma_z; each holder's cost parts are kept,
    tagged with its holders, by :func:`_combined_cost`)."""
    bx = max(r.bounds[0] for r in rels)
    by = max(r.bounds[1] for r in rels)
    sens = None if any(r.sensitivity is None for r in rels) \
        else max(r.sensitivity for r in rels)
    return {"bounds": (bx, by), "sensitivity": sens}


# -- releasing -------------------------------------------------------------------------------------


class _Accumulator:
    """Per-holder sums X^T X, X^T y, y^T y and row counts, fed chunk by chunk.

    ``holders``: the holder labels in their release order when they are known in advance (a
    holder count: 0..J-1, whatever the data); otherwise holders appear in first-row order.
    Rows are clipped to the bounds first. ``intercept``: the rows are [1, x] (appendix B.2).
    ``average_rows`` = k > 1 (appendix B.1): the clipped rows are kept per holder and summed in
    random groups of k by :meth:`finish`, so this needs memory for the rows.
    ``grid`` (secure noise): each row's (or group's) contribution is rounded to the grid and
    summed exactly in integers (``K``, :func:`bayesdp.secure_noise.grid_sums`), instead of S, z.
    """

    def __init__(self, d, bounds, holders=None, *, intercept=False, average_rows=1, grid=None):
        self.d = d
        self.bounds = bounds
        self.intercept = bool(intercept)
        self.average_rows = int(average_rows)
        self.grid = grid
        self.stats = {}  # holder label -> _HolderSums
        for lab in holders or ():
            self._new(lab)

    def _new(self, lab):
        if lab not in self.stats:
            D = self.d + int(self.intercept)
            self.stats[lab] = _HolderSums(np.zeros((D, D)), np.zeros(D), 0.0, 0, 0,
                                          np.zeros(self.d), np.zeros(self.d), 0.0, 0.0, [])
        return self.stats[lab]

    def add(self, X, y, labels, what="nodes"):
        X, y = _check_rows(X, y, self.d)
        X, y, clipped = privacy.clip_rows(X, y, *self.bounds)
        labels = np.asarray(labels)
        for lab in _unique_in_order(labels, what):
            m = labels == lab
            Xm, ym = X[m], y[m]
            st = self._new(lab)
            st.n += int(m.sum())
            st.n_clipped += int(clipped[m].sum())
            st.sx += Xm.sum(axis=0)
            st.sxx += np.einsum("ij,ij->j", Xm, Xm)
            st.sy += float(ym.sum())
            st.syy += float(ym @ ym)
            if self.average_rows > 1:
                st.rows.append((Xm, ym))
                continue
            W = self._design(Xm)
            if self.grid is not None:
                st.K = st.K + secure_noise.grid_sums(W, ym, self.grid)
                continue
            st.S += W.T @ W
            st.z += W.T @ ym
            st.yty += float(ym @ ym)

    def _design(self, X):
        return np.column_stack([np.ones(len(X)), X]) if self.intercept else X

    def finish(self, permutation):
        """With ``average_rows`` = k > 1: for each holder (in release order), a uniformly random
        partition of its rows (``permutation(n_j)``) into floor(n_j / k) groups of k, the
        n_j mod k rows left over dropped; each group contributes a = sum(w_i) / sqrt(k),
        b = sum(y_i) / sqrt(k) (w_i the design rows) to S, z and y^T y. Sets ``n_used``."""
        k = self.average_rows
        for st in self.stats.values():
            if k == 1:
                st.n_used = st.n
                continue
            X = np.concatenate([r[0] for r in st.rows]) if st.rows else np.zeros((0, self.d))
            y = np.concatenate([r[1] for r in st.rows]) if st.rows else np.zeros(0)
            st.rows = []
            m = st.n // k
            groups = np.asarray(permutation(st.n))[: m * k].reshape(m, k)
            A = self._design(X)[groups].sum(axis=1) / math.sqrt(k)
            b = y[groups].sum(axis=1) / math.sqrt(k)
            st.n_used = m
            if self.grid is not None:
                st.K = secure_noise.grid_sums(A, b, self.grid)
            else:
                st.S, st.z, st.yty = A.T @ A, A.T @ b, float(b @ b)

    def uncentred_columns(self, names, y_name="y"):
        """Columns (features and y, over all holders) whose |mean| exceeds their sd, as text
        ("x0 (mean 5.02, sd 1.01)"); the data holder's own check, not part of the release."""
        sts = list(self.stats.values())
        n = sum(st.n for st in sts)
        if n < 2:
            return []
        sx = sum(st.sx for st in sts) / n
        sxx = sum(st.sxx for st in sts) / n
        sy = sum(st.sy for st in sts) / n
        syy = sum(st.syy for st in sts) / n
        out = []
        for name, mean, sq in [*zip(names, sx, sxx), (y_name, sy, syy)]:
            sd = math.sqrt(max(sq - mean * mean, 0.0))
            if abs(mean) > sd:
                out.append(f"{name} (mean {mean:.3g}, sd {sd:.3g})")
        return out


@dataclasses.dataclass
class _HolderSums:
    S: np.ndarray
    z: np.ndarray
    yty: float
    n: int  # rows
    n_clipped: int
    sx: np.ndarray  # sum of the (clipped) feature columns, for the centring check
    sxx: np.ndarray
    sy: float
    syy: float
    rows: list  # (X, y) chunks kept for averaging
    n_used: int = 0  # rows (or groups, when averaging) in S, z
    K: object = 0  # secure noise: integer sums [vech(S), z, y^T y] / grid (an object array)


def _unique_in_order(labels, what="nodes"):
    """Distinct holder labels in order of first appearance; missing labels (None, NaN) and a
    mix of numbers and strings are refused with an error naming ``what``."""
    if labels.dtype.kind in "fcO":
        missing = np.array([v is None or (isinstance(v, (float, np.floating, complex))
                                          and not np.isfinite(v)) for v in labels.ravel()],
                           dtype=bool)
        if missing.any():
            raise BayesdpInputError(
                f"{what}: missing holder label (None or NaN) in {int(missing.sum())} rows (first "
                f"row {int(np.flatnonzero(missing)[0])}); every row needs a label")
    try:
        _, idx = np.unique(labels, return_index=True)
    except TypeError:
        raise BayesdpInputError(
            f"{what}: holder labels must be all numbers or all strings, got a mix of "
            f"{sorted({type(v).__name__ for v in labels.ravel()})}") from None
    return [labels[i].item() if hasattr(labels[i], "item") else labels[i] for i in np.sort(idx)]


def _check_rows(X, y, d=None):
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise BayesdpInputError(f"X must be a 2-d array (rows x features), got shape {X.shape}")
    if d is not None and X.shape[1] != d:
        raise BayesdpInputError(f"X must have {d} columns, got {X.shape[1]}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise BayesdpInputError(
            f"y must be a 1-d array with one value per row of X ({X.shape[0]}), got shape {y.shape}"
        )
    for name, a in (("X", X), ("y", y)):
        if np.iscomplexobj(a) or (a.dtype == object and any(isinstance(v, complex)
                                                            for v in a.ravel())):
            raise BayesdpInputError(
                f"{name} has complex values; bayesdp needs real numbers (the imaginary part "
                "would otherwise be dropped silently)")
    try:
        X = X.astype(np.float64)
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise BayesdpInputError("X and y must be numeric") from None
    bad = ~np.isfinite(X).all(axis=1) | ~np.isfinite(y)
    if bad.any():
        raise BayesdpInputError(
            f"X or y contains NaN or infinite values in {int(bad.sum())} rows (first row "
            f"{int(np.flatnonzero(bad)[0])}); remove or impute them before releasing"
        )
    return X, y


SPLITS = ("hash", "contiguous")

SPLIT_HASH_KEY = 0x6261796573647031  # b"bayesdp1": fixed and public; the split needs no secret


def _check_split(split):
    if split not in SPLITS:
        raise BayesdpInputError(f"split must be one of {SPLITS}, got {split!r}")
    return split


def _holder_count(nodes):
    """J when ``nodes`` is a holder count, None when it is a label array."""
    if isinstance(nodes, (int, np.integer)) and not isinstance(nodes, bool):
        if nodes < 1:
            raise BayesdpInputError(f"nodes must be >= 1, got {nodes}")
        return int(nodes)
    return None


def _node_labels(nodes, X, y, split="hash"):
    """Per-row holder labels and the holders in release order (None: first-appearance order).

    ``nodes`` is a count J (rows assigned by ``split``: "hash", each row by a hash of its own
    values; "contiguous", the authors' split in row order) or one label per row.
    """
    _check_split(split)
    n_rows = X.shape[0]
    J = _holder_count(nodes)
    if J is not None:
        if n_rows < J:
            raise BayesdpInputError(f"fewer rows ({n_rows}) than data holders (nodes={J})")
        if split == "contiguous":
            return contiguous_split(n_rows, J), list(range(J))
        return hash_split(X, y, J), list(range(J))
    labels = np.asarray(nodes)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise BayesdpInputError(
            f"nodes must be a holder count or one label per row ({n_rows}), got shape {labels.shape}"
        )
    return labels, None


def _mix64(h):
    """The splitmix64 finaliser on a uint64 array (wrapping arithmetic)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def row_hash(X, y):
    """A 64-bit hash of each row's own values [x_1, ..., x_d, y] (float64 bit patterns).

    It depends on that row only: on no other row, on no row position and on no row count.
    -0.0 and 0.0 hash alike. Not cryptographic, and it needs no secret: the privacy argument only
    uses that a row's holder is a function of the row itself.
    """
    A = np.ascontiguousarray(np.column_stack([np.asarray(X, dtype=np.float64),
                                              np.asarray(y, dtype=np.float64)]) + 0.0)
    W = A.view(np.uint64)
    h = np.full(A.shape[0], SPLIT_HASH_KEY, dtype=np.uint64)
    for k in range(W.shape[1]):
        h = _mix64(h ^ W[:, k])
    return _mix64(h ^ np.uint64(W.shape[1]))


def hash_split(X, y, J):
    """Holder label (0..J-1) of each row from a hash of that row's values (the default split).

    Adding or removing a row changes exactly one holder's statistics, by at most the per-row
    sensitivity Delta, so a count ``nodes=J`` keeps the add/remove-one guarantee of the whole
    release. Identical rows go to the same holder (harmless). Holder sizes are random around
    n/J (multinomial-like), not exactly equal.
    """
    return (row_hash(X, y) % np.uint64(J)).astype(np.int64)


def contiguous_split(n_rows, J):
    """Holder label of each row: rows in order, floor(n/J) each, the remainder to the last holder
    (the authors' split; ``split="contiguous"``).

    NOT add/remove-one private as it stands: removing a row moves rows of other people between
    holders (see :func:`bayesdp.privacy.contiguous_split_change`), so releases made with it are
    flagged ``dp_claim_valid=False``. Kept to reproduce the paper's experiments.
    """
    size = n_rows // J
    labels = np.minimum(np.arange(n_rows) // size, J - 1)
    return labels


def _resolve_bounds(bounds, X, y):
    if isinstance(bounds, str):
        if bounds == "private":
            raise BayesdpInputError("bounds='private' is estimated by release and release_file "
                                    "only; give public bounds (B_x, B_y) here")
        if bounds != "data":
            raise BayesdpInputError(
                f"bounds must be a pair (B_x, B_y), 'private' or 'data', got {bounds!r}")
        if X is None:
            raise BayesdpInputError("bounds='data' needs the data")
        warnings.warn(DATA_BOUNDS_WARNING, UserWarning, stacklevel=3)
        bx = float(privacy.row_norms(X)[0].max())
        by = float(np.abs(y).max())
        tiny = np.finfo(float).tiny
        return privacy.check_bounds((max(bx, tiny), max(by, tiny))), False
    if bounds is None:
        raise BayesdpInputError("bounds are required: public (B_x, B_y), or 'data' (not private)")
    return privacy.check_bounds(bounds), True


def _check_noise(noise, seed, calibration):
    """``noise`` is "float" or "secure"; secure noise takes no seed and the exact calibration."""
    if not isinstance(noise, str) or noise not in NOISES:
        raise BayesdpInputError(f"noise must be one of {NOISES}, got {noise!r}")
    if noise == "secure" and seed is not None:
        raise BayesdpInputError(
            "seed: noise='secure' draws its noise from the operating system's CSPRNG "
            "(secrets) and cannot be seeded (anyone who knows a seed can regenerate the noise); "
            "omit seed, or use noise='float' for a reproducible experiment")
    if noise == "secure" and calibration != "exact":
        raise BayesdpInputError(
            f"calibration: noise='secure' has its own exact accounting of the discrete Gaussian "
            f"and needs calibration='exact' (the default), got {calibration!r}")


def _secure_plan(epsilon, delta, bounds, d, *, intercept, average_rows, include_yty):
    """Grid, sensitivity and noise scale of a secure release (:func:`secure_noise.plan`)."""
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    sens = privacy.sensitivity_release(*bounds, intercept=intercept, average_rows=average_rows,
                                       with_yty=include_yty)
    dim = secure_noise.released_dim(d, intercept=intercept, with_yty=include_yty)
    return secure_noise.plan(eps, dlt, sens, dim)


BOUNDS_STREAM = 0x626F756E6473  # b"bounds": the seed stream of the private bounds estimate


def _private_bounds_setup(bounds, bounds_share, bounds_range, epsilon, delta):
    """For ``bounds="private"``: (share of epsilon, the grid of candidates); else None, after
    refusing private-bounds options given with other bounds."""
    if isinstance(bounds, str) and bounds == "private":
        eps, _ = privacy.check_epsilon_delta(epsilon, delta)
        share = privacy.check_bounds_share(
            privacy.PRIVATE_BOUNDS_SHARE if bounds_share is None else bounds_share)
        grid = privacy.bounds_grid(
            privacy.PRIVATE_BOUNDS_RANGE if bounds_range is None else bounds_range)
        return share * eps, grid
    for name, v in (("bounds_share", bounds_share), ("bounds_range", bounds_range)):
        if v is not None:
            raise BayesdpInputError(f"{name} applies to bounds='private' only, got "
                                    f"{name}={v!r} with bounds={bounds!r}")
    return None


def _estimate_bounds(hist, eps_bounds, seed):
    """Private (B_x, B_y) and their cost part; the draw has its own seed stream, so a seeded
    release's noise does not depend on it."""
    rng = np.random.default_rng(None if seed is None else [int(seed), BOUNDS_STREAM])
    return privacy.estimate_bounds(hist, eps_bounds, rng)


def _noisy_release(acc, *, epsilon, delta, calibration, include_yty, seed, feature_names,
                   private_bounds, source, split="labels", holder_name=None, plan=None,
                   bounds_part=None):
    """The release of the accumulated statistics. ``plan`` (secure noise,
    :func:`_secure_plan`): discrete Gaussian noise on the grid sums ``acc`` holds.
    ``bounds_part``: the cost of a private bounds estimate; the statistics get the rest of
    epsilon (basic composition)."""
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    bx, by = acc.bounds
    k = acc.average_rows
    eps_stats = eps
    if bounds_part is not None:
        eps_stats = eps - bounds_part["epsilon"]
        if bounds_part["epsilon"] + eps_stats > eps:  # rounding: the total must not exceed eps
            eps_stats = math.nextafter(eps_stats, 0.0)
    if plan is None:
        sens = privacy.sensitivity_release(bx, by, intercept=acc.intercept, average_rows=k,
                                           with_yty=include_yty)
        sigma = privacy.gaussian_sigma(eps_stats, dlt, sens, calibration)
    else:
        sens, sigma = plan["sensitivity"], plan["sigma"]
    if not sigma <= MAX_ABS / 100:  # the noisy statistics must stay below MAX_ABS
        raise BayesdpInputError(
            f"epsilon, bounds: the noise scale sigma = sensitivity * sigma(eps, delta) = "
            f"{sigma:.3g} (epsilon={eps:g}, delta={dlt:g}, B_x={bx:g}, B_y={by:g}) is too large "
            f"for float64 statistics; use a larger epsilon or smaller bounds")
    if calibration == "paper-code":
        warnings.warn(privacy.PAPER_CODE_WARNING, UserWarning, stacklevel=3)
    labels = list(acc.stats)
    rows = np.array([acc.stats[lab].n for lab in labels])
    if np.any(rows < k):
        few = [str(lab) for lab, nj in zip(labels, rows) if nj < k]
        how = " (split='hash' assigns rows by their values, so a holder can get none; use fewer " \
              "holders)" if split == "hash" and k == 1 else ""
        need = "at least one row" if k == 1 else f"at least average_rows={k} rows (one group)"
        raise BayesdpInputError(f"nodes: holder(s) {', '.join(few)} got "
                                f"{'no rows' if k == 1 else 'fewer than ' + str(k) + ' rows'}"
                                f"{how}; every data holder needs {need}")
    if not acc.intercept:
        far = acc.uncentred_columns(feature_names)
        if far:
            warnings.warn(
                "release without an intercept, but column(s) " + ", ".join(far[:5])
                + (" ..." if len(far) > 5 else "") + " are far from centred (|mean| > sd): a "
                "regression through the origin then fits badly unless E[y | x = 0] = 0. Consider "
                "intercept=True (command line: --intercept). This check reads the rows; it is "
                "shown to the data holder only and is not part of the release.",
                UserWarning, stacklevel=3)
    rng = np.random.default_rng(check_seed(seed))  # seed None: fresh OS entropy
    # the grouping of average_rows has its own stream, so the noise draws do not depend on it
    acc.finish(secure_noise.secret_permutation if plan is not None else
               np.random.default_rng(None if seed is None else [int(seed), GROUPING_STREAM]
                                     ).permutation)
    D = acc.d + int(acc.intercept)
    iu = np.triu_indices(D)
    S_hat, z_hat, yty_hat = [], [], []
    for lab in labels:
        st = acc.stats[lab]
        if plan is not None:  # exact integer sums on the grid plus discrete Gaussian noise
            nS = len(iu[0])
            used = nS + D + int(include_yty)
            vals = secure_noise.noisy_grid_values(st.K[:used], plan["scale"], plan["grid"])
            S_hat.append(layout.unvech(vals[:nS], D))
            z_hat.append(vals[nS:nS + D])
            if include_yty:
                yty_hat.append(float(vals[-1]))
            continue
        M = np.zeros((D, D))
        M[iu] = rng.standard_normal(len(iu[0]))
        M = M + np.triu(M, 1).T
        S_hat.append(st.S + sigma * M)
        z_hat.append(st.z + sigma * rng.standard_normal(D))
        if include_yty:
            yty_hat.append(st.yty + sigma * rng.standard_normal())
    n = np.array([acc.stats[lab].n_used for lab in labels])
    dp_valid = private_bounds and calibration != "paper-code"
    notes = []
    if not private_bounds:
        notes.append("bounds were read off the data, so the noise scale is not private")
    if calibration == "paper-code":
        notes.append("calibration='paper-code' under-calibrates sigma (authors' MATLAB bug)")
    if calibration == "classical":
        note = privacy.classical_shortfall(eps_stats, dlt)
        if note:
            dp_valid = False
            notes.append(note)
            warnings.warn(note, UserWarning, stacklevel=3)
    cost_sens, cost_note = sens, ""
    if split == "contiguous" and len(labels) > 1:
        factor = privacy.contiguous_split_change(int(rows.sum()), len(labels))
        note = _contiguous_note(factor, sigma, sens, eps, dlt, eps - eps_stats)
        dp_valid = False
        notes.append(note)
        warnings.warn(note, UserWarning, stacklevel=3)
        cost_sens, cost_note = factor * sens, accounting.contiguous_cost_note(factor)
    if private_bounds and plan is not None:
        cost = secure_noise.statistics_part(eps, dlt, sigma=sigma, sensitivity=sens,
                                            grid=plan["grid"], dim=plan["dim"])
    elif private_bounds:
        cost = accounting.gaussian_part(sigma, cost_sens, dlt, stated_epsilon=eps_stats,
                                        note=cost_note)
    else:
        cost = accounting.non_private_part(notes[0], sigma=sigma, sensitivity=sens)
    if k > 1:
        notes.append(_averaging_note(k, bx, by, acc.intercept, include_yty, sens))
    J = len(labels)
    design = "[1, x]" if acc.intercept else "x"
    if k > 1:
        design = f"sums of {design} over random groups of {k} rows, divided by sqrt({k})"
    return Release(
        S_hat=np.stack(S_hat),
        z_hat=np.stack(z_hat),
        n=n,
        sigma_s=np.full(J, sigma),
        sigma_z=np.full(J, sigma),
        feature_names=((INTERCEPT_NAME,) if acc.intercept else ()) + tuple(feature_names),
        holder_names=(holder_name,) if holder_name is not None and J == 1
        else tuple(str(lab) for lab in labels),
        epsilon=eps,
        delta=dlt,
        calibration=calibration,
        sensitivity=sens,
        bounds=(bx, by),
        private_bounds=private_bounds,
        seeded=seed is not None,
        n_clipped=np.array([acc.stats[lab].n_clipped for lab in labels]),
        yty_hat=np.array(yty_hat) if include_yty else None,
        sigma_yty=np.full(J, sigma) if include_yty else None,
        dp_claim_valid=dp_valid,
        dp_claim_note="; ".join(notes),
        intercept=acc.intercept,
        average_rows=k,
        n_rows=rows if k > 1 else None,
        privacy_cost=(cost,) if bounds_part is None else (bounds_part, cost),
        noise_mechanism="gaussian" if plan is None else secure_noise.MECHANISM,
        noise_grid=None if plan is None else plan["grid"],
        provenance={
            "created_by": f"bayesdp {_version()}",
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "mechanism": ("Gaussian" if plan is None else "discrete Gaussian")
            + " mechanism on [vech(S), z"
            + (", y^T y]" if include_yty else "]")
            + f" of the rows {design}"
            + (f"; sigma = sensitivity * sigma_{calibration}("
               + ("eps, delta)" if bounds_part is None
                  else "eps - eps of the bounds estimate, delta)") if plan is None else
               f", each row's contribution rounded to the grid {plan['grid']!r}; sigma = grid * "
               f"{plan['scale']} (the discrete Gaussian's scale in grid steps, from its (eps, "
               "delta) bound; docs/privacy.md section 10)"),
            "source": source,
            "split": {"hash": "hash of each row's values (nodes = holder count)",
                      "contiguous": "contiguous in row order (the authors' split; not add/remove "
                                    "private)",
                      "labels": "one holder label per row (given)"}[split],
            **({"bounds": f"estimated privately from the {int(rows.sum())} rows of this release "
                          f"(exponential mechanism, eps={bounds_part['epsilon']:g}; "
                          "docs/privacy.md section 11)"} if bounds_part is not None else {}),
        },
    )


GROUPING_STREAM = 0x67726F757073  # b"groups": the seed stream of average_rows' random groups


def _averaging_note(k, bx, by, intercept, include_yty, sens):
    """dp_claim_note of a release with average_rows = k > 1 (docs/privacy.md section 3b)."""
    row = privacy.sensitivity_release(bx, by, intercept=intercept, with_yty=include_yty)
    return (f"average_rows={k}: each holder's rows were summed in uniformly random groups of {k} "
            f"(secret grouping; the n mod {k} rows left over dropped) and divided by sqrt({k}). "
            f"The paper (appendix B.1) says these statistics have the same sensitivity as the "
            f"original ones; they do not: adding or removing one row can add or remove a whole "
            f"group (up to {k} x the per-row sensitivity) or swap one row of a group, so the "
            f"noise is calibrated to sensitivity {sens:.6g} = {sens / row:.4g} x the per-row "
            f"{row:.6g}, and the stated (eps, delta) holds")


def _contiguous_note(k, sigma, sens, eps, dlt, eps_bounds=0.0):
    """``eps_bounds``: the eps of a private bounds estimate, added to the statistics' true eps."""
    true_eps = eps_bounds + privacy.true_epsilon(sigma, dlt, sensitivity=k * sens)
    replace_eps = eps_bounds + privacy.true_epsilon(sigma, dlt, sensitivity=2 * sens)
    return (f"split='contiguous' (the authors' split of rows in order): adding or removing one "
            f"row moves other rows between holders, so the whole release can change by up to "
            f"{k:.4g} x the sensitivity it was calibrated for; under add/remove-one neighbouring "
            f"it is only ({true_eps:.4g}, {dlt:g})-DP, not ({eps:g}, {dlt:g}). Under replace-one "
            f"neighbouring with row order and n fixed it is ({replace_eps:.4g}, {dlt:g})-DP. Use "
            f"split='hash' (the default) for a private split")


def release(X, y, *, epsilon, delta, bounds, nodes=1, seed=None, calibration="exact",
            include_yty=False, feature_names=None, split="hash", holder_name=None,
            intercept=False, average_rows=1, noise="float", bounds_share=None,
            bounds_range=None) -> Release:
    """Release noisy (S_hat_j, z_hat_j, n_j) for each data holder with (eps, delta)-DP.

    Parameters
    ----------
    X, y : array-like or pandas DataFrame / Series
        Rows of the regression data; a DataFrame's column names become the feature names.
    epsilon, delta : float
        Privacy parameters (eps > 0, 0 < delta < 1), per holder; holders hold disjoint rows.
        With ``bounds="private"`` they are the total over the bounds estimate and the
        statistics.
    bounds : (B_x, B_y), "private" or "data"
        Public bounds on ||x||_2 and |y|. Rows outside are clipped (x scaled to norm B_x, y to
        [-B_y, B_y]) and counted per holder (``n_clipped``). ``"private"`` estimates them from
        the rows with DP, spending ``bounds_share`` of epsilon (docs/privacy.md section 11).
        ``"data"`` reads them off the data: a loud warning, and the release is flagged
        ``private_bounds=False``.
    bounds_share : float in (0, 1), default 0.1
        With ``bounds="private"``: the share of epsilon spent on the bounds. B_x and B_y are
        each estimated by an exponential mechanism with eps * bounds_share / 2 over the
        candidates of ``bounds_range`` (20 per factor of 10), aiming at the m-th largest
        ||x_i|| and |y_i| with m = ceil(2 ln(K / 0.001) / (eps * bounds_share / 2)); the
        statistics get eps * (1 - bounds_share) and all of delta. The estimate uses all the
        rows of this call (one pair of bounds for all its holders) and needs at least 4 m of
        them.
    bounds_range : (low, high), default (1e-6, 1e9)
        With ``bounds="private"``: the public range of candidate bounds. Values above ``high``
        are clipped to at most ``high``.
    nodes : int or array of labels
        Number of holders J, or one holder label per row. With labels, a row's holder is a
        property of that row (e.g. the hospital that holds it).
    split : "hash" | "contiguous"
        How a holder count J assigns rows. "hash" (default): each row to holder
        hash(row values) mod J, a function of that row alone, so adding or removing one row
        changes one holder's statistics by at most Delta (add/remove-one DP of the whole
        release); holder sizes are random around n/J. "contiguous": the authors' split (rows in
        order, floor(n/J) each, the remainder to the last holder), for reproducing the paper; a
        row removal moves other rows between holders, so the release is flagged
        ``dp_claim_valid=False`` with the true eps in ``dp_claim_note`` (and a warning).
    seed : int or None
        None draws the noise from fresh OS entropy (right for a real release). A seed makes the
        release reproducible (for experiments and tests) and is recorded as ``seeded``.
    calibration : "exact" | "classical" | "paper-code"
        "paper-code" reproduces the authors' buggy MATLAB sigma and is NOT (eps, delta)-DP.
    include_yty : bool
        Also release a noisy y^T y with the larger sensitivity of appendix C.1 (for MCMC-B&S).
    holder_name : str or None
        The name of the single holder (``nodes=1``), e.g. ``"hospital_a"``; it names the
        holder's coordinates after :func:`combine_releases`, which refuses the same name in two
        inputs. Default: ``"0"``, a made-up name that combine renames ``"<k>:0"``.
    intercept : bool
        Release the statistics of the rows [1, x] (appendix B.2): S_hat holds n, sum x and
        X^T X, z_hat holds sum y and X^T y, and the first feature (theta's first coordinate) is
        named "intercept". The sensitivity is that of the augmented row (docs/privacy.md, 3b).
        Without it, a warning (to the data holder only) names columns far from centred.
    average_rows : int
        k > 1 (appendix B.1): each holder's rows are summed in uniformly random groups of k
        (the n_j mod k rows left over are dropped) and divided by sqrt(k), which makes
        non-normal features closer to normal. ``n`` then counts groups and ``n_rows`` rows. The
        sensitivity is max(k Delta_row, Delta_swap), not the paper's Delta (docs/privacy.md 3b;
        the release's dp_claim_note says so). Needs memory for the rows.
    noise : "float" | "secure"
        "float" (default): numpy's PCG64 Gaussian noise, seedable; right for simulations and
        reproducible experiments. "secure": for real releases; each row's contribution is
        rounded to a power-of-two grid gamma and summed exactly, and discrete Gaussian noise
        N_Z(0, s^2) gamma is drawn exactly from the OS CSPRNG (Canonne, Kamath & Steinke 2020),
        so no floating-point leak remains (Mironov 2012). It cannot be seeded (a seed is an
        error) and needs calibration="exact". Its (eps, delta) rests on the discrete
        Gaussian's zCDP (their Theorem 14 and Corollary 13), so sigma is 1.084 times the
        float mode's at (1, 1e-5) (docs/privacy.md section 10).

    Noise: S_hat_j = S_j + sigma M_j, z_hat_j = z_j + sigma v_j (eqs. 2-3), sigma =
    Delta * sigma(eps, delta), Delta = sqrt(B_x^4 + B_x^2 B_y^2) (eps * (1 - bounds_share)
    in place of eps with private bounds).
    """
    df_names = _dataframe_names(X) if feature_names is None and hasattr(X, "columns") else None
    check_seed(seed)
    _check_noise(noise, seed, calibration)
    _check_holder_name(holder_name, nodes)
    private = _private_bounds_setup(bounds, bounds_share, bounds_range, epsilon, delta)
    if private is not None and noise == "secure":
        raise BayesdpInputError(
            "noise: noise='secure' with bounds='private' is not supported yet (the secure "
            "calibration is fixed before the bounds are estimated); use public bounds")
    X, y = _check_rows(X, y)
    if X.shape[0] < 1:
        raise BayesdpInputError("X has no rows")
    if feature_names is not None:
        names = _feature_names(feature_names, X.shape[1], "feature_names")
    else:
        names = df_names if df_names is not None else [f"x{i}" for i in range(X.shape[1])]
    k = _check_design(intercept, average_rows, names)
    labels, holders = _node_labels(nodes, X, y, split)
    part = None
    if private is not None:
        hist = privacy.BoundsHistogram(private[1])
        hist.add(X, y)
        bnds, part = _estimate_bounds(hist, private[0], seed)
        private_bounds = True
    else:
        bnds, private_bounds = _resolve_bounds(bounds, X, y)
    plan = None if noise == "float" else _secure_plan(
        epsilon, delta, bnds, X.shape[1], intercept=intercept, average_rows=k,
        include_yty=include_yty)
    acc = _Accumulator(X.shape[1], bnds, holders, intercept=intercept, average_rows=k,
                       grid=None if plan is None else plan["grid"])
    acc.add(X, y, labels)
    return _noisy_release(acc, epsilon=epsilon, delta=delta, calibration=calibration,
                          include_yty=include_yty, seed=seed, feature_names=names,
                          private_bounds=private_bounds, source="arrays",
                          split="labels" if holders is None else split,
                          holder_name=holder_name, plan=plan, bounds_part=part)


def release_file(path, *, epsilon, delta, bounds, nodes=1, y_column=None, node_column=None,
                 header="infer", seed=None, calibration="exact", include_yty=False,
                 chunksize=100_000, split="hash", holder_name=None, progress=None,
                 intercept=False, average_rows=1, noise="float", bounds_share=None,
                 bounds_range=None) -> Release:
    """Release from a CSV or Parquet file far larger than memory, in constant memory.

    The statistics are accumulated chunk by chunk; noise is added once per holder at the end.
    ``y_column`` names (or indexes) the response (default: the last column that is not
    ``node_column``); every other column except ``node_column`` is a feature. ``nodes`` is a holder count, its rows assigned by ``split`` as in :func:`release`
    ("hash": one pass; "contiguous", the authors' split, flagged not private: the file is read
    once more to count rows), or omitted when ``node_column`` names a column of holder labels.
    ``bounds`` are public (B_x, B_y); rows outside are clipped and counted.
    ``header`` is "infer" (first row has names) or None (no header, as in the paper's CSVs).
    With "infer", a CSV whose first row has a field that parses as a number is refused: it is
    most likely a data row, whose values would otherwise be published as feature names (and the
    row dropped). Pass ``header=None`` for such files (CLI ``--no-header``).
    ``bounds="private"`` (with ``bounds_share`` and ``bounds_range`` as in :func:`release`)
    costs one more pass, which counts ||x|| and |y| in the cells of the public candidate grid
    (constant memory), and estimates the bounds from all the rows of the file.
    ``bounds="data"`` costs one more pass, warns, and flags the release not private.
    ``holder_name`` names the single holder (``nodes=1``), as in :func:`release`.
    ``progress``: a progress bar per pass over the file on stderr (share of the file read, time
    left): None (default) when stderr is a terminal, True / False to force it.
    ``intercept`` and ``average_rows`` as in :func:`release`; ``average_rows`` > 1 keeps the
    clipped rows in memory (the groups are a random partition of all of a holder's rows).
    ``noise`` as in :func:`release`: "float" (default) or "secure" (discrete Gaussian on a grid
    from the OS CSPRNG; no seed).
    """
    path = Path(path)
    if not path.exists():
        raise BayesdpInputError(f"data file {str(path)!r} does not exist")
    if path.is_dir():
        raise BayesdpInputError(f"data file {str(path)!r} is a folder, not a file")
    privacy.check_epsilon_delta(epsilon, delta)
    if header not in ("infer", None):
        raise BayesdpInputError(f"header must be 'infer' or None, got {header!r}")
    check_seed(seed)
    _check_noise(noise, seed, calibration)
    _check_holder_name(holder_name, nodes if node_column is None else None)
    if header == "infer" and path.suffix.lower() not in (".parquet", ".pq"):
        _check_csv_header(path)
    if chunksize < 1:
        raise BayesdpInputError(f"chunksize must be >= 1, got {chunksize}")
    _check_split(split)
    k = _check_design(intercept, average_rows)
    private = _private_bounds_setup(bounds, bounds_share, bounds_range, epsilon, delta)
    if private is not None and noise == "secure":
        raise BayesdpInputError(
            "noise: noise='secure' with bounds='private' is not supported yet (the secure "
            "calibration is fixed before the bounds are estimated); use public bounds")
    data_bounds = isinstance(bounds, str) and bounds == "data"
    bnds = None if data_bounds or private else _resolve_bounds(bounds, None, None)[0]
    J = None
    if node_column is None:
        J = _holder_count(nodes)
        if J is None:
            raise BayesdpInputError(f"nodes must be a whole number >= 1, got {nodes!r} (per-row "
                                    "labels in a file go in a column: node_column)")
    passes = 2 if (node_column is None and split == "contiguous") or data_bounds \
        or private else 1
    part = None
    if passes == 2:
        # first pass: count rows, and read the bounds off the data or count the rows per cell
        # of the candidate grid for the private estimate
        n_rows, bx, by = 0, 0.0, 0.0
        hist = privacy.BoundsHistogram(private[1]) if private else None
        for chunk, feats, ycol, _ in _iter_columns(path, header, chunksize, y_column, node_column,
                                                   progress, f"{path.name} (pass 1/2)"):
            n_rows += len(chunk)
            if data_bounds or private:
                Xc, yc = _check_rows(chunk[feats].to_numpy(), chunk[ycol].to_numpy())
            if data_bounds:
                bx = max(bx, float(privacy.row_norms(Xc)[0].max(initial=0.0)))
                by = max(by, float(np.abs(yc).max(initial=0.0)))
            if private:
                hist.add(Xc, yc)
        if data_bounds:
            warnings.warn(DATA_BOUNDS_WARNING, UserWarning, stacklevel=2)
            tiny = np.finfo(float).tiny
            bnds = privacy.check_bounds((max(bx, tiny), max(by, tiny)))
        if private:
            if n_rows == 0:
                raise BayesdpInputError(f"{path}: no data rows")
            bnds, part = _estimate_bounds(hist, private[0], seed)
    if J is not None and split == "contiguous":
        if n_rows < J:
            raise BayesdpInputError(f"fewer rows ({n_rows}) than data holders (nodes={J})")
        size = n_rows // J
    acc = plan = None
    start = 0
    names = None
    desc = path.name + (" (pass 2/2)" if passes == 2 else "")
    for chunk, feats, ycol, ncol in _iter_columns(path, header, chunksize, y_column, node_column,
                                                  progress, desc):
        if names is None:
            names = [str(c) for c in feats]
            _check_design(intercept, k, names)
            plan = None if noise == "float" else _secure_plan(
                epsilon, delta, bnds, len(feats), intercept=intercept, average_rows=k,
                include_yty=include_yty)
            acc = _Accumulator(len(feats), bnds, None if J is None else list(range(J)),
                               intercept=intercept, average_rows=k,
                               grid=None if plan is None else plan["grid"])
        try:
            Xc = chunk[feats].to_numpy(dtype=np.float64)
            yc = chunk[ycol].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            bad = [c for c in [*feats, ycol] if not _numeric_column(chunk[c])]
            what = ", ".join(f"{c!r}" + (" (y_column)" if c == ycol else "") for c in bad)
            raise BayesdpInputError(
                f"{path}: non-numeric values in column(s) {what or '?'} in rows "
                f"{start}..{start + len(chunk) - 1}"
                + (f"; columns: {list(chunk.columns)} (holder labels go in node_column)"
                   if bad else "")
            ) from None
        if ncol is None and split == "contiguous":
            labels = np.minimum((start + np.arange(len(chunk))) // size, J - 1)
        elif ncol is None:
            labels = hash_split(Xc, yc, J) if np.isfinite(Xc).all() and np.isfinite(yc).all() \
                else np.zeros(len(chunk), dtype=np.int64)  # NaN rows: refused by acc.add
        else:
            labels = chunk[ncol].to_numpy()
        try:
            acc.add(Xc, yc, labels, "node_column" if ncol is not None else "nodes")
        except BayesdpInputError as exc:
            raise BayesdpInputError(f"{path}, rows {start}..{start + len(chunk) - 1}: {exc}") from None
        start += len(chunk)
    if acc is None or start == 0:
        raise BayesdpInputError(f"{path}: no data rows")
    if J is not None and start < J:
        raise BayesdpInputError(f"fewer rows ({start}) than data holders (nodes={J})")
    return _noisy_release(acc, epsilon=epsilon, delta=delta, calibration=calibration,
                          include_yty=include_yty, seed=seed, feature_names=names,
                          private_bounds=not data_bounds, source=f"file {path.name}",
                          split="labels" if J is None else split, holder_name=holder_name,
                          plan=plan, bounds_part=part)


def _check_design(intercept, average_rows, names=()):
    """Validate ``intercept`` and ``average_rows``; return k. With an intercept no feature may
    be called "intercept" (the name of theta's first coordinate)."""
    if not isinstance(intercept, (bool, np.bool_)):
        raise BayesdpInputError(f"intercept must be True or False, got {intercept!r}")
    k = average_rows
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise BayesdpInputError(f"average_rows must be a whole number >= 1, got {average_rows!r}")
    if intercept and INTERCEPT_NAME in list(names):
        raise BayesdpInputError(
            f"feature_names: {INTERCEPT_NAME!r} is the name of the intercept column that "
            "intercept=True adds; rename that feature")
    return int(k)


def _check_holder_name(holder_name, nodes):
    """``holder_name`` is for a single holder (a count ``nodes=1``) and must be a name someone
    chose: a non-empty string that is not a made-up name ("0", "1", "k:j")."""
    if holder_name is None:
        return
    if not isinstance(holder_name, str) or not holder_name.strip():
        raise BayesdpInputError(f"holder_name must be a non-empty string, got {holder_name!r}")
    if _is_default_holder_name(holder_name):
        raise BayesdpInputError(
            f"holder_name {holder_name!r}: names made of digits (and ':') are the ones bayesdp "
            "makes up and renames on combine; choose a name such as 'hospital_a'")
    if _holder_count(nodes) != 1:
        raise BayesdpInputError(
            "holder_name names the single holder of a release with nodes=1; with several "
            f"holders (nodes={nodes!r} or a node column) the holders are named by their labels")


def _looks_numeric(text) -> bool:
    """True when a name is a number as a CSV reader would parse it ("3", "-0.5", "1e3", "nan")."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        return True
    try:
        float(str(text).strip())
    except ValueError:
        return False
    return True


def _check_csv_header(path):
    """Refuse a CSV whose header row (header="infer") holds numbers: it is then most likely a
    data row, and its values would be published as feature names (and the row dropped)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None
    if first is None:
        raise BayesdpInputError(f"{path}: the file is empty")
    numeric = [k for k, f in enumerate(first) if _looks_numeric(f)]
    if numeric:
        raise BayesdpInputError(
            f"{path}: header: the first row has {len(numeric)} of {len(first)} fields that are "
            f"numbers (columns {numeric[:10]}{' ...' if len(numeric) > 10 else ''}), so it looks "
            "like a data row, not column names; bayesdp will not publish data values as feature "
            "names. If the file has no header row pass header=None (command line: --no-header); "
            "otherwise give the columns names that are not numbers"
        )


def _feature_names(names, d, where):
    """Validated feature names: d distinct strings that are not numbers (a number as a name is
    most likely a data value, e.g. a header-less CSV read with its first row as header)."""
    names = list(names)
    if len(names) != d:
        raise BayesdpInputError(f"{where}: expected {d} feature names, got {len(names)}")
    for k, f in enumerate(names):
        if not isinstance(f, str):
            raise BayesdpInputError(
                f"{where}: feature name {k} is {f!r} ({type(f).__name__}); names must be strings")
        if _looks_numeric(f):
            raise BayesdpInputError(
                f"{where}: feature name {k} is {f!r}, a number; a number as a column name is most "
                "likely a data value (e.g. a CSV without header read with header=0), and it "
                "would be published: give names that are not numbers")
    return names


def _dataframe_names(X):
    """Feature names from a DataFrame's columns: strings, or positions 0..d-1 (a RangeIndex,
    e.g. from header=None), which become "0", "1", ...; anything else is refused."""
    cols = list(X.columns)
    if all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cols) \
            and [int(c) for c in cols] == list(range(len(cols))):
        return [str(c) for c in cols]
    return _feature_names(cols, len(cols), "X.columns")


def _numeric_column(col):
    try:
        col.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return True


def _iter_columns(path, header, chunksize, y_column, node_column, progress=False, desc=None):
    """Chunks of a data file with the feature, response and node column names resolved."""
    for chunk in _iter_chunks(path, header, chunksize, progress, desc):
        cols = list(chunk.columns)
        ncol = None if node_column is None else _pick_column(cols, node_column, "node_column")
        if y_column is None:
            rest = [c for c in cols if c != ncol]
            if not rest:
                raise BayesdpInputError(f"{path}: no column besides node_column={ncol!r}")
            ycol = rest[-1]
        else:
            ycol = _pick_column(cols, y_column, "y_column")
        if ncol is not None and ycol == ncol:
            raise BayesdpInputError(
                f"{path}: y_column={y_column!r} and node_column={node_column!r} are the same "
                f"column {ycol!r}; the response and the holder labels must be different columns")
        feats = [c for c in cols if c != ycol and c != ncol]
        if not feats:
            raise BayesdpInputError(f"{path}: no feature columns besides y_column={ycol!r}")
        yield chunk, feats, ycol, ncol


def _pick_column(cols, key, what):
    if isinstance(key, (int, np.integer)):
        try:
            return cols[key]
        except IndexError:
            raise BayesdpInputError(f"{what}={key} is out of range for {len(cols)} columns") from None
    if key not in cols:
        hint = ""
        if isinstance(key, str) and key.lstrip("-").isdigit():
            hint = " (a column index must be an integer)"
        raise BayesdpInputError(f"{what}={key!r} is not a column (columns: {cols}){hint}")
    return key


#: file endings pandas reads as compressed (its ``compression="infer"``)
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".zip": "zip", ".xz": "xz", ".zst": "zstd",
                ".tar": "tar"}


def _iter_chunks(path, header, chunksize, progress=False, desc=None):
    """DataFrames of ``chunksize`` rows; with a progress bar over the rows (Parquet) or the bytes
    of the file read so far (CSV, compressed or not)."""
    import pandas as pd

    from .progress import bar

    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - depends on the install
            raise BayesdpInputError("reading Parquet needs pyarrow (pip install pyarrow)") from None
        pf = pq.ParquetFile(path)
        with bar(pf.metadata.num_rows, desc, progress=progress, unit="row",
                 unit_scale=True) as pb:
            for batch in pf.iter_batches(batch_size=chunksize):
                pb.update(batch.num_rows)
                yield batch.to_pandas()
        return
    hdr = 0 if header == "infer" else None
    comp = _COMPRESSION.get(suffix)
    if suffix in (".gz", ".bz2", ".xz") and path.name.lower().endswith(".tar" + suffix):
        comp = "tar"
    try:
        with open(path, "rb") as fh, bar(path.stat().st_size, desc, progress=progress, unit="B",
                                          unit_scale=True, unit_divisor=1024) as pb:
            reader = pd.read_csv(fh, header=hdr, chunksize=chunksize, compression=comp)
            for chunk in reader:
                pb.update(fh.tell() - pb.n)  # what the parser has read of the file so far
                yield chunk
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
