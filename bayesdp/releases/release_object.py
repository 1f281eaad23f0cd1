"""The :class:`Release` object: the noisy summary statistics of J data holders.

Each data holder j releases once (paper eqs. 2-3)

    S_hat_j = X_j^T X_j + sigma_s M_j,   M_j symmetric, upper triangle incl. diagonal iid N(0, 1)
    z_hat_j = X_j^T y_j + sigma_z v_j,   v_j ~ N(0, I_d)

The object checks every field when it is made (whoever made it: :func:`bayesdp.release`, a file,
an adapter), one method per group of fields (the statistics, the names, the privacy claim, the
design, y^T y, the noise, the origin, the cost); its JSON file format is written and read by
:mod:`bayesdp.releases.files` (docs/release-format.md).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np

from .. import accounting, privacy, secure_noise
from ..errors import BayesdpInputError
from .cost import claim_of, derive_cost
from .holders import is_default_holder_name
from .spec import ReleaseSpec, check_average_rows, check_intercept

INTERCEPT_NAME = "intercept"
"""Name of the first feature of a release with an intercept (appendix B.2): theta[0]."""

_NOISE_MECHANISMS = ("gaussian", secure_noise.MECHANISM)

MAX_ABS = 1e150
"""Largest magnitude accepted for a number in a release: squares and products of the statistics
(S theta, sigma^2, S C S) must stay finite in float64 (largest about 1.8e308)."""

_NOISE_COV_PSD_RTOL = 1e-10
"""``noise_cov`` eigenvalues may be negative by rounding only: >= -_NOISE_COV_PSD_RTOL * max
|eig|."""

MAX_COUNT = 2**53
"""Largest row count accepted (exact in float64)."""


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
    ``delta``, the sigmas and ``sensitivity`` (:func:`bayesdp.releases.cost.derive_cost`).
    ``noise_mechanism``: "gaussian" (float noise) or "discrete_gaussian" (``noise="secure"``:
    every released number is a multiple of ``noise_grid``, a power of two; docs/privacy.md 10).
    With ``bounds="private"`` the first part is the "bounds" estimate's (its
    ``{"name": "bounds", "mechanism": "exponential", ...}``) and the statistics part follows;
    their basic composition is the release's (epsilon, delta) (docs/privacy.md, "Private
    bounds").

    ``table``: the :class:`~bayesdp.releases.formula.TableEncoding` of a release made from a
    table with a formula (docs/tables.md): the formula, the declared bounds of its columns and
    the design they give (the feature names are its columns, the bounds its derived (B_x, B_y));
    public, and written to the file. ``n_clamped`` (J, k): the values of each holder clamped to
    their declared ranges, one column per numeric column of the table
    (``table.numeric_columns``); exact counts, like ``n_clipped`` not covered by the DP
    guarantee, so a file holds them only when asked (``include_clip_counts``).

    ``claim`` (not a parameter): the :class:`~bayesdp.releases.cost.Claim` the release
    reports, its stated ``epsilon`` and ``delta`` when its noise pays for them, else what the
    noise pays for (:func:`~bayesdp.releases.cost.claim_of`); every table, attribute and
    command line reports ``claim``, never the stated numbers alone. ``dp_claim_valid`` is
    false when the claim is not the stated one or there is none.

    ``spec``: the :class:`~bayesdp.releases.spec.ReleaseSpec` the release was made by
    (:func:`bayesdp.release` and its kin), kept in memory only: a file never holds it (its seed
    would let anyone regenerate the noise), so a release read from a file, combined or built
    by an adapter has None.
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
    bounds_from_data: bool = False
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
    spec: Optional[ReleaseSpec] = None
    table: Optional[object] = None
    n_clamped: Optional[np.ndarray] = None
    claim: Optional[object] = dataclasses.field(default=None, init=False, compare=False)

    def __post_init__(self):
        """Check every field, group by group; normalise arrays to float64 (counts to int64),
        names to tuples of strings; derive the cost when none is given."""
        self._check_statistics()
        self._check_names()
        self._check_privacy_claim()
        self._check_design()
        self._check_yty()
        self._check_noise()
        self._check_origin()
        self._check_table()
        self._check_cost()
        self._check_claim()

    def _check_claim(self):
        """``claim``: what the release reports (:func:`~bayesdp.releases.cost.claim_of`);
        ``dp_claim_valid`` false and the reason in ``dp_claim_note`` when the stated claim is
        not met or there is none."""
        claim = claim_of(self)
        self._set("claim", claim)
        if claim.status in ("none", "recomputed"):
            self._set("dp_claim_valid", False)
            if claim.note not in self.dp_claim_note:
                self._set("dp_claim_note", "; ".join(x for x in (self.dp_claim_note, claim.note)
                                                     if x))

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    def _check_statistics(self):
        """``S_hat`` (J, d, d) symmetric (to rounding; symmetrised), ``z_hat`` (J, d), ``n``
        (J,) whole numbers >= 1, ``sigma_s`` and ``sigma_z`` one number >= 0 or J of them; every
        number finite and at most MAX_ABS."""
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
        self._set("S_hat", 0.5 * S + 0.5 * np.swapaxes(S, 1, 2))  # halves: no overflow
        self._set("z_hat", _float_array("z_hat", self.z_hat, shape=(J, d)))
        self._set("n", _whole_numbers("n", self.n, J))
        for name in ("sigma_s", "sigma_z"):
            sig = _float_array(name, np.broadcast_to(getattr(self, name), (J,)), shape=(J,))
            if np.any(sig < 0):
                raise BayesdpInputError("sigma_s and sigma_z must be >= 0")
            self._set(name, sig)

    def _check_names(self):
        """``feature_names``: d distinct names (default "x0", "x1", ...); ``holder_names``: J
        distinct names (default "0", "1", ...)."""
        d, J = self.d, self.J
        names = tuple(str(f) for f in self.feature_names) or tuple(f"x{i}" for i in range(d))
        if len(names) != d or len(set(names)) != d:
            raise BayesdpInputError(f"feature_names must be {d} distinct names, got {names!r}")
        holders = tuple(str(h) for h in self.holder_names) or tuple(str(j) for j in range(J))
        if len(holders) != J or len(set(holders)) != J:
            raise BayesdpInputError(f"holder_names must be {J} distinct names, got {holders!r}")
        self._set("feature_names", names)
        self._set("holder_names", holders)

    def _check_privacy_claim(self):
        """The claim and what the noise was calibrated to: ``epsilon`` and ``delta`` (both or
        neither), a known ``calibration``, public ``bounds`` (B_x, B_y) > 0 and a
        ``sensitivity`` > 0, each optional."""
        if self.epsilon is not None or self.delta is not None:
            privacy.check_epsilon_delta(self.epsilon, self.delta)
        if self.calibration is not None and self.calibration not in privacy.CALIBRATIONS:
            raise BayesdpInputError(
                f"calibration must be one of {privacy.CALIBRATIONS}, got {self.calibration!r}"
            )
        self._set("bounds", None if self.bounds is None else privacy.check_bounds(self.bounds))
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
            self._set("sensitivity", sens)

    def _check_design(self):
        """The rows' design: ``intercept`` (then d >= 2 and the first feature named
        "intercept"), ``average_rows`` = k, ``n_rows`` (each n_j = floor(n_rows_j / k)) and
        ``n_clipped`` (0 <= n_clipped_j <= the rows of holder j)."""
        J, n = self.J, self.n
        intercept = check_intercept(self.intercept)
        if intercept and self.d < 2:
            raise BayesdpInputError(f"intercept: a release with an intercept has the intercept "
                                    f"and at least one feature (d >= 2), got d={self.d}")
        if intercept and self.feature_names[0] != INTERCEPT_NAME:
            raise BayesdpInputError(
                f"feature_names: a release with an intercept names its first feature "
                f"{INTERCEPT_NAME!r}, got {self.feature_names[0]!r}")
        k = check_average_rows(self.average_rows)
        self._set("intercept", intercept)
        self._set("average_rows", k)
        if self.n_rows is not None:
            rows = _whole_numbers("n_rows", self.n_rows, J)
            if np.any(rows // k != n):
                raise BayesdpInputError(
                    f"n_rows: with average_rows={k} each holder's n_j must be its number of "
                    f"groups floor(n_rows_j / {k}); got n={n.tolist()}, n_rows={rows.tolist()}")
            self._set("n_rows", rows)
        if self.n_clipped is not None:
            try:
                nc = _whole_numbers("n_clipped", self.n_clipped, J, minimum=0)
            except BayesdpInputError:
                nc = None
            # clipping counts rows: at most n_j, or n_rows_j when rows were averaged
            top = self.n_rows if self.n_rows is not None else (n if k == 1 else None)
            if nc is None or (top is not None and np.any(nc > top)):
                raise BayesdpInputError(
                    f"n_clipped must be {J} whole numbers with 0 <= n_clipped_j <= "
                    f"{'n_j' if k == 1 else 'n_rows_j'}, got {self.n_clipped!r}"
                )
            self._set("n_clipped", nc)

    def _check_yty(self):
        """``yty_hat`` (J,) with ``sigma_yty`` (one number >= 0 or J of them), or neither."""
        J = self.J
        if self.yty_hat is None:
            if self.sigma_yty is not None:
                raise BayesdpInputError("sigma_yty is given without yty_hat")
            return
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
        self._set("yty_hat", yty)
        self._set("sigma_yty", sy)

    def _check_noise(self):
        """The noise beyond the sigmas: ``noise_cov`` (J, D, D), D = d(d+1)/2 + d, symmetric
        and positive semi-definite for every holder (to _NOISE_COV_PSD_RTOL), or None; and the
        noise mechanism (:meth:`_check_noise_mechanism`)."""
        if self.noise_cov is not None:
            J, d = self.J, self.d
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
                tol = _NOISE_COV_PSD_RTOL * max(float(np.max(np.abs(w))), np.finfo(float).tiny)
                if w[0] < -tol:
                    raise BayesdpInputError(
                        f"noise_cov of holder {j} is not positive semi-definite (smallest "
                        f"eigenvalue {w[0]:.3g}, allowed >= -{tol:.3g}); a covariance must be PSD")
            self._set("noise_cov", cov)
        self._check_noise_mechanism()

    def _check_noise_mechanism(self):
        """``noise_mechanism`` is known; a discrete Gaussian release has a power-of-two grid,
        every released number on it, and no general noise covariance."""
        mech = self.noise_mechanism
        if mech not in _NOISE_MECHANISMS:
            raise BayesdpInputError(f"noise_mechanism must be one of {_NOISE_MECHANISMS}, got "
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
        self._set("noise_grid", g)

    def _check_origin(self):
        """How the release was made: ``provenance`` a dict (copied), ``spec`` the
        :class:`~bayesdp.releases.spec.ReleaseSpec` it was made by, or None."""
        if self.spec is not None and not isinstance(self.spec, ReleaseSpec):
            raise BayesdpInputError(f"spec must be a ReleaseSpec or None, got "
                                    f"{type(self.spec).__name__}")
        self._set("provenance", dict(self.provenance))

    def _check_table(self):
        """``table`` (a :class:`~bayesdp.releases.formula.TableEncoding`, or None) agrees with
        the feature names, intercept and bounds; ``n_clamped`` goes with it
        (:func:`bayesdp.releases.formula.check_release_table`)."""
        if self.table is None:
            if self.n_clamped is not None:
                raise BayesdpInputError("n_clamped is given without a table encoding")
            return
        from .formula import check_release_table

        self._set("n_clamped", check_release_table(self))

    def _check_cost(self):
        """``privacy_cost``: a non-empty list of cost parts, each checked
        (:func:`bayesdp.accounting.check_part`); None derives it from the other fields
        (:func:`bayesdp.releases.cost.derive_cost`)."""
        if self.privacy_cost is None:
            self._set("privacy_cost", derive_cost(self))
            return
        parts = self.privacy_cost
        if isinstance(parts, dict) or not isinstance(parts, (list, tuple)) or not parts:
            raise BayesdpInputError(
                f"privacy_cost must be a non-empty list of cost parts, got {parts!r}")
        self._set("privacy_cost", tuple(
            accounting.check_part(p, f"privacy_cost[{i}]", self.holder_names)
            for i, p in enumerate(parts)))

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
    def named_holders(self) -> tuple:
        """The holder names someone chose (``hospital_a``), without the ones bayesdp makes up
        when none is given ("0", "1", ... and "k:j" from a combine), which carry no identity."""
        return tuple(h for h in self.holder_names if not is_default_holder_name(h))

    @property
    def bounds_part(self):
        """The "bounds" part of ``privacy_cost`` (bounds estimated with DP), or None."""
        return next((p for p in self.privacy_cost if p.get("name") == "bounds"), None)

    def __repr__(self):
        claim = str(self.claim)
        flags = []
        if self.bounds_from_data:
            flags.append("NOT PRIVATE: bounds read off the data")
        if not self.dp_claim_valid and self.claim.status != "none":
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
        if self.table is not None:
            shape += f", formula {self.table.formula!r}"
        if self.average_rows > 1:
            shape += f", average_rows={self.average_rows} (n = groups)"
        return (
            f"Release(J={self.J}, d={self.d}{shape}, n={self.n.tolist()}, {claim}, "
            f"calibration={self.calibration}, sigma_s={_fmt(self.sigma_s)}, "
            f"sigma_z={_fmt(self.sigma_z)}){extra}"
        )

    # -- files (the format: :mod:`bayesdp.releases.files`) ---------------------------------------
    # (files.py builds Release objects, so it is imported in the methods, not at the top)
    def to_dict(self, include_clip_counts=False) -> dict:
        """The JSON-ready dictionary of the release file format (docs/release-format.md).

        ``n_clipped`` is an exact count of the holder's rows, not covered by the DP guarantee,
        so it is left out unless ``include_clip_counts`` is true.
        """
        from .files import release_to_dict

        return release_to_dict(self, include_clip_counts)

    def save(self, path, include_clip_counts=False, overwrite=False) -> Path:
        """Write the release to ``path`` as JSON, atomically (no partial file on failure).

        An existing ``path`` is refused and left as it is, byte for byte, unless ``overwrite``
        (a release file records a budget already spent). The exact clipping counts stay out of
        the file unless ``include_clip_counts`` is true (they are not differentially private;
        see docs/privacy.md).
        """
        from .files import save_release

        return save_release(self, path, include_clip_counts, overwrite)

    @classmethod
    def from_dict(cls, doc: dict) -> "Release":
        from .files import release_from_dict

        return release_from_dict(doc)


def _fmt(a):
    a = np.asarray(a)
    return f"{a[0]:.4g}" if np.all(a == a[0]) else "[" + ", ".join(f"{v:.4g}" for v in a) + "]"


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
