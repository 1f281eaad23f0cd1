"""``BayesDPRegressor``: release -> fit -> predict as a scikit-learn estimator.

With scikit-learn installed (``pip install bayesdp[sklearn]``) the class is a scikit-learn
regressor (``RegressorMixin``, ``BaseEstimator``, tags declared): ``clone``, pipelines,
``cross_val_score`` and ``GridSearchCV`` work with it, and it passes scikit-learn's
``check_estimator`` (tests/test_estimator.py). Without scikit-learn it follows the same
conventions by hand (parameters stored unchanged by ``__init__``, ``get_params`` /
``set_params``, ``fit`` returns self, fitted attributes end in ``_``, ``score`` = R^2).

Every ``fit`` makes a new differentially private release of the rows it is given, so every
``fit`` spends privacy budget: see :class:`BayesDPRegressor`, "Privacy budget".
"""

from __future__ import annotations

import inspect

import numpy as np

from . import accounting, inference, releases
from .errors import BayesdpInputError, check_seed
from .predict import check_new_rows, feature_names, predictive_moments, table_design

SKLEARN_MIN_VERSION = "1.6"
"""The oldest scikit-learn the estimator supports, as the ``sklearn`` extra pins it
(pyproject.toml: ``scikit-learn>=1.6,<2``): tags (``__sklearn_tags__``), ``validate_data`` and
the ``check_estimator`` suite that tests/test_estimator.py runs."""

try:  # scikit-learn >= 1.6 (SKLEARN_MIN_VERSION, the pin of the sklearn extra)
    from sklearn.base import BaseEstimator as _SkBase
    from sklearn.base import RegressorMixin as _SkRegressor
    from sklearn.exceptions import NotFittedError as _SkNotFitted
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - exercised by installs without scikit-learn
    _SkBase = _SkRegressor = None
    _SkNotFitted = ValueError
    _validate_data = None

HAVE_SKLEARN = _validate_data is not None
"""Whether scikit-learn (with tags and ``validate_data``; supported: >= SKLEARN_MIN_VERSION)
was importable."""


class NotFittedError(BayesdpInputError, _SkNotFitted):
    """``predict`` or ``score`` before ``fit``; also scikit-learn's ``NotFittedError`` when
    scikit-learn is installed."""


class _ParamsByHand:
    """scikit-learn's parameter protocol without scikit-learn: ``get_params``, a ``repr`` of
    the parameters that differ from their defaults, and ``score`` = R^2 (``set_params`` is
    :meth:`BayesDPRegressor.set_params`, with and without scikit-learn)."""

    @classmethod
    def _get_param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep=True) -> dict:
        """The constructor's parameters as a dict (``deep`` is accepted for compatibility)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def __repr__(self):
        defaults = {p.name: p.default
                    for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not (v is defaults.get(k) or (type(v) is type(defaults.get(k))
                                                  and v == defaults.get(k)))]
        return f"{type(self).__name__}({', '.join(shown)})"

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of ``predict(X)`` against ``y``."""
        y = np.asarray(y, dtype=float).ravel()
        pred = self.predict(X)
        if y.shape != pred.shape:
            raise BayesdpInputError(f"y must have one value per row of X ({pred.shape[0]}), got "
                                    f"shape {np.shape(y)}")
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        ss_res = float(np.sum(w * (y - pred) ** 2))
        ss_tot = float(np.sum(w * (y - np.average(y, weights=w)) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


_BASES = (_SkRegressor, _SkBase) if HAVE_SKLEARN else (_ParamsByHand,)


class BayesDPRegressor(*_BASES):
    """Differentially private Bayesian linear regression as a scikit-learn regressor.

    ``fit(X, y)`` makes an (epsilon, delta)-DP release of the rows (:func:`bayesdp.release`:
    rows clipped to the public ``bounds``, split over ``nodes`` holders) and fits the posterior
    from the release alone (:func:`bayesdp.fit`); ``predict(X)`` is the posterior predictive
    mean of y. The model is y = x^T theta + N(0, sigma_y^2), without intercept (the paper's):
    centre y and X with public constants, or add a constant column, if you need one; or give a
    ``formula`` (below), whose intercept is the release's.

    With a ``formula`` (docs/tables.md) the estimator takes tables: ``fit(table)`` releases
    the rows of a pandas DataFrame encoded by the formula, ``bounds`` is the dict of declared
    column bounds ``{column: (lo, hi)}`` / ``{column: [levels]}``, and ``predict(table)`` and
    ``score(table)`` encode new rows the same way (``score``'s y defaults to the formula's
    response, clamped as the release clamps it).

    Parameters
    ----------
    epsilon, delta : privacy parameters of the release each ``fit`` makes (per holder).
    bounds : (B_x, B_y), or with a ``formula`` a dict of declared column bounds
        Public bounds on ||x||_2 and |y| (required; rows outside are clipped). ``"data"`` reads
        them off the rows, which is NOT private (the release is flagged and has no privacy
        cost that can be added up).
    formula : str or None
        An R-style formula over the columns of the tables ``fit`` and ``predict`` take, e.g.
        ``"log(cnt + 1) ~ temp + C(season)"`` (:func:`bayesdp.release`).
    method : str
        Inference method (``bayesdp.METHODS``); default ``"eiv"``: the noise on S carried into
        theta's likelihood, theta's prior scale and sigma_y^2 integrated on grids, then theta
        given them exactly (closed form); the method whose intervals hold on real data
        (docs/methods.md, "eiv"). ``"fast"`` is a closed form but
        fixes sigma_y^2 at (B_y / 3)^2, which makes ``return_std`` and intervals wide.
    nodes : number of data holders J the rows are split over (default 1).
    seed : None or int
        None (default): every fit draws its release noise from fresh OS entropy (right for real
        data, and needed for a privacy budget). An int makes release and fit reproducible, for
        experiments only: anyone who knows the seed can recompute the noise, and every fit with
        that seed (each fold of a cross-validation, each point of a grid search) adds the SAME
        noise to the statistics of its rows. Those releases are not independent: subtracting
        two of them gives the statistics of the rows in one and not the other with no noise at
        all. A seeded fit therefore has no DP guarantee and the costs of seeded fits do not
        add up: ``privacy_cost_`` records no total and ``budget`` refuses.
    random_state : None, int, numpy RandomState or Generator
        scikit-learn's name for ``seed``, with the same meaning (a seeded fit: no DP guarantee),
        for ``clone``, ``GridSearchCV`` and ``check_estimator``, which set it; an instance draws
        the seed. Give ``seed`` or ``random_state`` (both only when equal).
    calibration, priors, num_samples, num_chains, num_warmup :
        passed to :func:`bayesdp.release` / :func:`bayesdp.fit`.
    include_yty : bool
        Release y^T y as well (same budget, :func:`bayesdp.release`); the default method then
        estimates sigma_y^2 from it, which calibrates ``predict``'s intervals and
        ``return_std`` (docs/prediction.md, "Calibrated prediction intervals: release y^T y
        too"). Default True, as :func:`bayesdp.release`.
    method_options : dict or None
        Further keyword arguments of :func:`bayesdp.fit` (e.g. ``{"sigma_y2": 1.0}`` for
        ``fast``).

    Attributes (after ``fit``)
    --------------------------
    coef_ : (d,) posterior mean of theta (exact closed-form mean for ``fast``); with a
        ``formula``, of the coefficients of its columns (``release_.table.feature_names``).
    intercept_ : 0.0 (the model has none; for scikit-learn compatibility); with a formula that
        has an intercept, its posterior mean.
    idata_ : the posterior, ArviZ InferenceData.
    release_ : the :class:`bayesdp.Release` that was fitted (the only thing that saw the rows).
    privacy_cost_ : dict
        The privacy cost of this fit's release, as recorded in the release
        (:func:`bayesdp.accounting.privacy_cost`): ``{"parts": [...], "total": {"epsilon",
        "delta", "rho", "accountant", "note"}}``. Without a DP guarantee (``bounds="data"``, or
        a seeded fit) the total's numbers are None and its ``note`` says why; the parts still
        describe the noise that was added.
    n_features_in_ : d.
    feature_names_in_ : (d,) object array of the DataFrame's column names, when ``X`` was a
        DataFrame with string column names (they are also the ``feature`` coordinates of
        ``idata_``). ``predict`` then matches a DataFrame's columns by name.

    Privacy budget
    --------------
    Every call of ``fit`` releases the rows it is given once more, at (epsilon, delta), and the
    costs of releases of the same rows add up (sequential composition). Anything that fits
    several times makes several releases: ``cross_val_score`` with c folds makes c, each of the
    rows of c - 1 folds, so every row is in c - 1 of them; a ``GridSearchCV`` over k values
    with c folds makes k x c (every row in k x (c - 1)), plus one of all rows for the refit
    (``refit=True``, the default). These counts take each row's fold as fixed; folds cut by
    row position (``KFold``) move when a row is added or removed, which they do not cover.
    ``privacy_cost_`` is one fit's cost and ``budget(n_fits)`` the total of ``n_fits`` fits
    that each cost the same, in the terms of :func:`bayesdp.accounting.budget` (``bayesdp
    budget`` on the command line). Fits of different costs (a grid over ``epsilon``,
    ``delta``, ``bounds``, ``nodes`` or ``calibration``) are added up with
    ``bayesdp.accounting.budget``: the releases of kept fits
    (``cross_validate(..., return_estimator=True)``) as ``*[e.release_ for e in fits]``, and
    n fits that cost what a kept fit cost as ``accounting.repeated(fit.release_, n)``.
    A budget needs ``seed=None``: seeded fits repeat their noise (``seed`` above).

    Preprocessing
    -------------
    Only the rows this estimator is given are released with DP. A pipeline step fitted on the
    rows, such as ``make_pipeline(StandardScaler(), BayesDPRegressor(...))``, computes
    statistics of the private rows (the scaler's ``mean_`` and ``scale_``, kept in the fitted
    pipeline) without noise, outside any DP guarantee. Scale with public constants instead:
    ``FunctionTransformer`` with public centres and scales, or a scaler fitted on public data
    and frozen (``sklearn.frozen.FrozenEstimator``); ``bounds`` are bounds on the transformed
    rows.

    Errors
    ------
    Bad input (missing bounds, NaN, complex or sparse X, a y of the wrong length, ``predict``
    before ``fit``) raises an error naming what is wrong. scikit-learn's ``cross_val_score``
    and ``GridSearchCV`` turn a failed fit into a NaN score with a ``FitFailedWarning`` by
    default (and raise only when every fit failed); pass ``error_score="raise"`` to have the
    error itself.
    """

    def __init__(self, epsilon=1.0, delta=1e-5, bounds=None, method="eiv", nodes=1, seed=None,
                 calibration="exact", include_yty=True, priors=None, num_samples=1000,
                 num_chains=4, num_warmup=1000, method_options=None, formula=None,
                 random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.method = method
        self.nodes = nodes
        self.seed = seed
        self.calibration = calibration
        self.include_yty = include_yty
        self.priors = priors
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.method_options = method_options
        self.formula = formula
        self.random_state = random_state

    def _seed(self):
        """The one seed of ``seed`` and ``random_state`` (an int, or None for OS entropy)."""
        if self.seed is not None and self.random_state is not None \
                and not (isinstance(self.random_state, (int, np.integer))
                         and self.random_state == self.seed):
            raise BayesdpInputError(
                f"seed={self.seed!r} and random_state={self.random_state!r}: they are one "
                "parameter under two names (random_state is scikit-learn's); give one of them")
        value = self.seed if self.seed is not None else self.random_state
        if isinstance(value, (np.random.RandomState, np.random.Generator)):
            # scikit-learn's convention: an instance draws the seed (still a seeded fit)
            draw = value.randint if isinstance(value, np.random.RandomState) else value.integers
            value = int(draw(0, 2**31 - 1))
        return check_seed(value, "seed" if self.seed is not None else "random_state")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False  # sparse X is refused with a message saying so
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        # The release adds noise of sd ~ B_x^2 / epsilon to every entry of X^T X: at small n
        # (scikit-learn's check uses 200 rows) the fit is noise-dominated by design.
        tags.regressor_tags.poor_score = True
        # seed=None (and random_state=None) draws the release noise from OS entropy: two fits
        # differ. scikit-learn's checks set random_state=0, which makes them reproducible.
        tags.non_deterministic = self.seed is None and self.random_state is None
        return tags

    def set_params(self, **params):
        """Set constructor parameters by name (``name=value``), with or without scikit-learn.

        Parameters
        ----------
        **params : new values of parameters of ``__init__``; a name that is not one is refused
            (:class:`bayesdp.errors.BayesdpInputError` listing the parameters).

        Returns
        -------
        self.
        """
        valid = self._get_param_names()
        for name in params:
            if name not in valid:
                raise BayesdpInputError(
                    f"set_params: {name!r} is not a parameter of {type(self).__name__} "
                    f"(parameters: {', '.join(valid)})")
        if HAVE_SKLEARN:
            return super().set_params(**params)
        for name, value in params.items():
            setattr(self, name, value)
        return self

    # -- fit / predict / score ------------------------------------------------------------------

    def fit(self, X, y=None):
        """Release (X, y) with DP and fit the posterior from the release.

        Parameters
        ----------
        X : array (n, d) or DataFrame of numbers (no NaN, infinite, complex or sparse input);
            with a ``formula``, the table (a DataFrame with the columns the formula uses)
        y : array (n,) (a (n, 1) column is accepted with a warning); with a ``formula``, left
            out (the response is the formula's left side)

        Returns
        -------
        self, fitted (see the class's attributes). Spends one release's privacy budget.
        """
        if self.bounds is None:
            raise BayesdpInputError(
                "bounds: BayesDPRegressor needs public bounds (B_x, B_y) on ||x||_2 and |y|, "
                "e.g. BayesDPRegressor(bounds=(10.0, 5.0)); rows outside are clipped"
                if self.formula is None else
                "bounds: with a formula, BayesDPRegressor needs the public range or levels of "
                "each column it uses, e.g. bounds={'x': (0, 10), 'region': ['north', 'south']}")
        seed = self._seed()  # one seed, one noise: see the class's "seed"
        s_release = s_fit = None
        if seed is not None:
            s_release, s_fit = (int(s) for s in np.random.default_rng(seed).integers(0, 2**62, 2))
        if self.formula is not None:
            return self._fit_table(X, y, s_release, s_fit)
        names = _string_columns(X)
        if HAVE_SKLEARN:
            X, y = _as_input_error(lambda: _validate_data(
                self, X, y, reset=True, accept_sparse=False, dtype=np.float64,
                ensure_all_finite=True, y_numeric=True, multi_output=False))
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        rel = releases.release(X, y, epsilon=self.epsilon, delta=self.delta, bounds=self.bounds,
                               nodes=self.nodes, seed=s_release, calibration=self.calibration,
                               include_yty=self.include_yty, feature_names=names)
        idata = inference.fit(rel, method=self.method, seed=s_fit, priors=self.priors,
                              num_samples=self.num_samples, num_chains=self.num_chains,
                              num_warmup=self.num_warmup, **(self.method_options or {}))
        self.release_ = rel
        self.idata_ = idata
        self.privacy_cost_ = _seeded_cost(accounting.privacy_cost(rel), seed) \
            if rel.seeded else accounting.privacy_cost(rel)
        self.n_features_in_ = rel.d
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        self.coef_ = _posterior_mean(idata)
        self.intercept_ = 0.0
        return self

    def predict(self, X, return_std=False):
        """Posterior predictive mean of y at the rows of X.

        Parameters
        ----------
        X : array (m, d) or DataFrame; a DataFrame with the fitted feature names may have them
            in any order (matched by name).
        return_std : bool
            Also return the predictive sd, sqrt(var(x^T theta) + E[sigma_y^2])
            (:func:`bayesdp.prediction_summary`).

        Returns
        -------
        mean (m,), or (mean, sd) with ``return_std=True``.
        """
        self._check_fitted()
        names = feature_names(self.idata_)
        if self.release_.table is not None:
            X, _ = check_new_rows(table_design(self.idata_, X, names, self.release_, "X"),
                                  names, what="X")
            return self._moments(X, return_std)
        fitted_names = getattr(self, "feature_names_in_", None)
        if fitted_names is not None and _string_columns(X) is not None \
                and set(X.columns) == set(fitted_names) and len(X.columns) == len(fitted_names):
            X = X[list(fitted_names)]  # matched by name, as bayesdp.predict does
        if HAVE_SKLEARN:
            X = _as_input_error(lambda: _validate_data(
                self, X, reset=False, accept_sparse=False, dtype=np.float64,
                ensure_all_finite=True))
        elif hasattr(X, "columns") and fitted_names is None:
            X = X.to_numpy()  # fitted on an array: columns by position
        X, _ = check_new_rows(X, names, what="X")
        return self._moments(X, return_std)

    def _moments(self, X, return_std):
        """The predictive mean (and sd) at the design rows X."""
        mean, sd, _ = predictive_moments(self.idata_, X)
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))):
            raise BayesdpInputError(  # never hand NaN to a scorer, which would average it
                "predict: the posterior gives non-finite predictions at these rows (rows far "
                "outside the bounds the release was made with?)")
        return (mean, sd) if return_std else mean

    def score(self, X, y=None, sample_weight=None):
        """Coefficient of determination R^2 of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : rows as for :meth:`predict`; y : array (m,) (with a ``formula``, None: the
            formula's response of the table's rows); sample_weight : array (m,) or None.

        Returns
        -------
        float R^2 (1 is a perfect fit; 0 that of predicting the mean of y).
        """
        if y is None and getattr(self, "release_", None) is not None \
                and self.release_.table is not None:
            y = self.release_.table.encode(X)[1]  # the formula's response, clamped
        y_arr = np.asarray(y)
        if y_arr.ndim == 0 or (y_arr.ndim == 2 and y_arr.shape[1] != 1) or y_arr.ndim > 2:
            raise BayesdpInputError(f"y must be one value per row, got shape {y_arr.shape}")
        n_rows = _num_rows(X)
        if n_rows is not None and y_arr.shape[0] != n_rows:
            raise BayesdpInputError(f"y must have one value per row of X ({n_rows}), got "
                                    f"shape {y_arr.shape}")
        r2 = float(super().score(X, y, sample_weight=sample_weight))
        if not np.isfinite(r2):
            raise BayesdpInputError("score: R^2 is not finite (y has NaN or infinite values?)")
        return r2

    def budget(self, n_fits=1, *, delta=None, accountant="zcdp"):
        """The privacy budget spent by ``n_fits`` fits that each cost what this fit cost.

        ``bayesdp.accounting.budget(accounting.repeated(self.release_, n_fits), ...)``: right
        for a cross-validation (c fits) and for a grid over parameters that do not change the
        cost (``method``, ``priors``, ...). It does NOT know what other fits cost: for a grid
        over ``epsilon``, ``delta``, ``bounds``, ``nodes`` or ``calibration`` add up each
        value's fits with :func:`bayesdp.accounting.budget` and
        :func:`bayesdp.accounting.repeated` (class docstring, "Privacy budget").

        Parameters
        ----------
        n_fits : int >= 1
            How many fits, e.g. c for a cross-validation with c folds, k x c + 1 for a grid
            search over k values of equal cost with c folds and its refit.
        delta : float in (0, 1) or None
            The delta of the total (default: the sum of the releases' deltas).
        accountant : "zcdp" (default), "basic" or "pld", as in :func:`bayesdp.accounting.budget`.

        Returns
        -------
        :class:`bayesdp.accounting.Budget` with the total ``epsilon``, ``delta`` and ``rho``.

        Raises
        ------
        BayesdpInputError for a fit without a DP guarantee: a seeded fit (every fit with the
        seed repeats the same noise, so the releases are not independent and their costs do not
        compose) or ``bounds="data"``.
        """
        self._check_fitted()
        if isinstance(n_fits, bool) or not isinstance(n_fits, (int, np.integer)) or n_fits < 1:
            raise BayesdpInputError(f"n_fits must be a whole number >= 1, got {n_fits!r}")
        if self.release_.seeded:
            raise BayesdpInputError(f"budget: {self.privacy_cost_['total']['note']}")
        label = "this fit" if n_fits == 1 else f"this fit x {int(n_fits)}"
        return accounting.budget(accounting.repeated(self.release_, n_fits, label=label),
                                 delta=delta, accountant=accountant)

    def _fit_table(self, table, y, s_release, s_fit):
        """``fit`` with a formula: release the table's rows encoded by it and fit (which records
        the encoding in the posterior, attrs ``table_encoding``, so that
        :func:`bayesdp.predict` encodes new tables the same way)."""
        if y is not None:
            raise BayesdpInputError("y: with a formula the response is the formula's left side; "
                                    "call fit(table)")
        rel = releases.release(table, formula=self.formula, epsilon=self.epsilon, delta=self.delta,
                      bounds=self.bounds, nodes=self.nodes, seed=s_release,
                      calibration=self.calibration, include_yty=self.include_yty)
        idata = inference.fit(rel, method=self.method, seed=s_fit, priors=self.priors,
                    num_samples=self.num_samples, num_chains=self.num_chains,
                    num_warmup=self.num_warmup, **(self.method_options or {}))
        self.release_ = rel
        self.idata_ = idata
        self.privacy_cost_ = _seeded_cost(accounting.privacy_cost(rel), self._seed()) \
            if rel.seeded else accounting.privacy_cost(rel)
        used = [c for c in table.columns if c in rel.table.columns]
        self.feature_names_in_ = np.asarray(used, dtype=object)
        self.n_features_in_ = len(used)
        theta = _posterior_mean(idata)
        self.intercept_ = float(theta[0]) if rel.intercept else 0.0
        self.coef_ = theta[int(rel.intercept):]
        return self

    def _check_fitted(self):
        if not hasattr(self, "idata_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(X, y) first")


def _seeded_note(seed):
    """Why a seeded fit has no privacy budget."""
    shown = "" if seed is None else f" (seed={seed!r})"
    return (f"this fit was seeded{shown}: its release noise can be recomputed from the seed, and "
            "every fit with that seed (each fold of a cross-validation, each point of a grid "
            "search) adds the same noise, so two releases of overlapping rows, subtracted, give "
            "the statistics of the rows in one and not the other without noise. A seeded fit "
            "has no DP guarantee and seeded fits' costs do not add up; fit with seed=None for a "
            "privacy budget")


def _seeded_cost(cost, seed):
    """A seeded fit's cost record: the parts as recorded (the noise added), no total."""
    note = _seeded_note(seed)
    if cost["total"].get("note"):
        note = f"{note}; {cost['total']['note']}"
    return {"parts": cost["parts"], "total": {"epsilon": None, "delta": None, "rho": None,
                                              "accountant": None, "note": note}}


def _string_columns(X):
    """The column names of a DataFrame whose column names are all strings, else None."""
    cols = getattr(X, "columns", None)
    if cols is None or not all(isinstance(c, str) for c in cols):
        return None
    return [str(c) for c in cols]


def _num_rows(X):
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[0])
    try:
        return len(X)
    except TypeError:
        return None


def _as_input_error(check):
    """Run scikit-learn's validation; its ValueErrors become :class:`BayesdpInputError` with
    the same message (which scikit-learn's own checks match)."""
    try:
        return check()
    except BayesdpInputError:
        raise
    except ValueError as exc:
        raise BayesdpInputError(str(exc)) from exc


def _posterior_mean(idata):
    """The posterior mean of theta: the exact closed-form mean when the fit has one."""
    from .report import gaussian_moments  # pandas and scipy.stats: not loaded on import

    closed = gaussian_moments(idata)
    if closed is not None:
        return closed[0]
    return np.asarray(idata.posterior["theta"].mean(("chain", "draw")).values)
