"""``BayesDPRegressor``: release -> fit -> predict behind scikit-learn's estimator conventions.

No dependency on scikit-learn: the class follows its conventions by hand (parameters stored
unchanged by ``__init__``, ``get_params``/``set_params``, ``fit`` returns self, fitted attributes
end in ``_``, ``predict``, ``score`` = R^2), so ``sklearn.base.clone``, pipelines and grid
searches work with it where scikit-learn is installed.
"""

from __future__ import annotations

import inspect

import numpy as np

from .errors import BayesdpInputError, check_seed


class BayesDPRegressor:
    """Differentially private Bayesian linear regression, scikit-learn style.

    ``fit(X, y)`` makes an (epsilon, delta)-DP release of the rows (:func:`bayesdp.release`:
    rows clipped to the public ``bounds``, split over ``nodes`` holders) and fits the posterior
    from the release alone (:func:`bayesdp.fit`); ``predict(X)`` is the posterior predictive
    mean of y. The model is y = x^T theta + N(0, sigma_y^2), without intercept (the paper's):
    centre y and X with public constants, or add a constant column, if you need one.

    Parameters
    ----------
    epsilon, delta : privacy parameters of the release (per holder).
    bounds : (B_x, B_y)
        Public bounds on ||x||_2 and |y| (required; rows outside are clipped). ``"data"`` reads
        them off the rows, which is NOT private (the release is flagged).
    method : str
        Inference method (``bayesdp.METHODS``); default ``"eiv"`` (the noise on S carried into
        theta's likelihood, sigma_y^2 integrated out; a closed form whose intervals hold on
        real data, docs/methods.md). ``"fast"`` is a closed form but fixes sigma_y^2 at
        (B_y / 3)^2, which makes ``return_std`` and intervals wide.
    nodes : number of data holders J the rows are split over (default 1).
    seed : None or int
        None (default): the release noise comes from fresh OS entropy (right for real data).
        An int makes release and fit reproducible - for experiments only, the noise of a seeded
        release can be recomputed by anyone who knows the seed.
    calibration, priors, num_samples, num_chains, num_warmup :
        passed to :func:`bayesdp.release` / :func:`bayesdp.fit`.
    method_options : dict or None
        Further keyword arguments of :func:`bayesdp.fit` (e.g. ``{"sigma_y2": 1.0}`` for
        ``fast``).

    Attributes (after ``fit``)
    --------------------------
    coef_ : (d,) posterior mean of theta (exact closed-form mean for ``fast``).
    intercept_ : 0.0 (the model has none; for scikit-learn compatibility).
    idata_ : the posterior, ArviZ InferenceData.
    release_ : the :class:`bayesdp.Release` that was fitted (the only thing that saw the rows).
    n_features_in_ : d.
    feature_names_in_ : (d,) object array of the DataFrame's column names, when ``X`` was a
        DataFrame with string column names (they are also the ``feature`` coordinates of
        ``idata_``).
    """

    def __init__(self, epsilon=1.0, delta=1e-5, bounds=None, method="eiv", nodes=1, seed=None,
                 calibration="exact", priors=None, num_samples=1000, num_chains=4,
                 num_warmup=1000, method_options=None):
        given = locals()
        for name in self._param_names():  # stored unchanged, as scikit-learn's clone expects
            setattr(self, name, given[name])

    # -- scikit-learn's parameter protocol ------------------------------------------------------

    @classmethod
    def _param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep=True) -> dict:
        """The constructor's parameters as a dict (``deep`` is accepted for compatibility)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor parameters by name; returns self. Unknown names are refused."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise BayesdpInputError(
                    f"set_params: {name!r} is not a parameter of BayesDPRegressor (parameters: "
                    f"{', '.join(valid)})")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(self.__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not (v is defaults.get(k) or (type(v) is type(defaults.get(k))
                                                  and v == defaults.get(k)))]
        return f"BayesDPRegressor({', '.join(shown)})"

    # -- fit / predict / score ------------------------------------------------------------------

    def fit(self, X, y):
        """Release (X, y) with DP, fit the posterior from the release; returns self."""
        from .inference import fit
        from .releases import release
        from .report import gaussian_moments

        if self.bounds is None:
            raise BayesdpInputError(
                "bounds: BayesDPRegressor needs public bounds (B_x, B_y) on ||x||_2 and |y|, "
                "e.g. BayesDPRegressor(bounds=(10.0, 5.0)); rows outside are clipped")
        seed = check_seed(self.seed)
        s_release = s_fit = None
        if seed is not None:
            s_release, s_fit = (int(s) for s in np.random.default_rng(seed).integers(0, 2**62, 2))
        for attr in ("feature_names_in_",):
            if hasattr(self, attr):
                delattr(self, attr)
        rel = release(X, y, epsilon=self.epsilon, delta=self.delta, bounds=self.bounds,
                      nodes=self.nodes, seed=s_release, calibration=self.calibration)
        idata = fit(rel, method=self.method, seed=s_fit, priors=self.priors,
                    num_samples=self.num_samples, num_chains=self.num_chains,
                    num_warmup=self.num_warmup, **(self.method_options or {}))
        self.release_ = rel
        self.idata_ = idata
        self.n_features_in_ = rel.d
        if hasattr(X, "columns") and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(list(X.columns), dtype=object)
        closed = gaussian_moments(idata)
        if closed is not None:
            self.coef_ = closed[0]
        else:
            self.coef_ = np.asarray(idata.posterior["theta"].mean(("chain", "draw")).values)
        self.intercept_ = 0.0
        return self

    def predict(self, X, return_std=False):
        """Posterior predictive mean of y at the rows of X (m,); with ``return_std=True`` also
        its sd, sqrt(var(x^T theta) + E[sigma_y^2]) (:func:`bayesdp.prediction_summary`)."""
        from .predict import check_new_rows, feature_names, predictive_moments

        self._check_fitted()
        if hasattr(X, "columns") and not hasattr(self, "feature_names_in_"):
            X = X.to_numpy()  # fitted on an array: columns by position, as scikit-learn does
        X, _ = check_new_rows(X, feature_names(self.idata_), what="X")
        mean, sd, _ = predictive_moments(self.idata_, X)
        return (mean, sd) if return_std else mean

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of ``predict(X)`` (scikit-learn's ``score``)."""
        y = np.asarray(y, dtype=float).ravel()
        pred = self.predict(X)
        if y.shape != pred.shape:
            raise BayesdpInputError(f"y must have one value per row of X ({pred.shape[0]}), got "
                                    f"shape {np.shape(y)}")
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        ss_res = float(np.sum(w * (y - pred) ** 2))
        ss_tot = float(np.sum(w * (y - np.average(y, weights=w)) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0

    def _check_fitted(self):
        if not hasattr(self, "idata_"):
            raise BayesdpInputError("this BayesDPRegressor is not fitted yet; call fit(X, y) "
                                    "first")
