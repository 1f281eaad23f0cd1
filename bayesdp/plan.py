"""Planning a release before spending the budget: what (epsilon, J, n) buy, per coefficient.

:func:`plan` answers "what will my intervals be?" from public facts: the design (pilot rows, or
an earlier release of the same holders), the row count n, the public bounds, the number of
holders J and the privacy parameters. :func:`smallest_epsilon` answers the inverse: the
smallest epsilon at which every named coefficient reaches a target.

How: the plan simulates the releases the holders would make and fits each exactly as
:func:`bayesdp.fit` would (the method's own runner), so the planned numbers are the fit's
numbers on releases like the real one:

- **The holders' data.** Each of the J holders holds n_j = n / J rows (the remainder to the
  first holders) with the pilot's second moments: S_j = n_j G, G = W^T W / m over the m pilot
  rows W (clipped to the bounds as :func:`bayesdp.release` clips them; [1, x] with an
  intercept). y = w^T theta + e, e ~ N(0, sigma^2): theta and sigma^2 are the pilot's least
  squares fit when the pilot has y; without y they follow from an assumed R^2 (below); for an
  earlier release they are its "eiv" posterior means. z_j = S_j theta + sigma G_j^{1/2} u_j
  (u_j ~ N(0, I): the rows' own noise) and y_j^T y_j = theta^T S_j theta
  + 2 theta^T (z_j - S_j theta) + n_j sigma^2.
- **The release.** The noise of the release these settings make (eqs. 2-3: sigma = Delta
  sigma(eps, delta), Delta from the bounds; :class:`~bayesdp.releases.PartialStatistics`'
  ``release`` computes it), added to each holder's (S_j, z_j (, y^T y)).
- **The fit.** The method's runner (``fit``'s, without the derived groups and the checks) on
  each of ``releases`` such releases; the plan reports the means over them of the posterior
  sd, the prior share (eiv, fast) and the half-width of the equal-tailed interval, and the
  root mean square error of the posterior mean and of adaSSP's estimate
  (:func:`~bayesdp.inference.adassp.adassp_from_sums`, its own mechanism at the same eps,
  delta) against the non-private least-squares fit of the same simulated rows (what the
  privacy noise costs; the rows' own sampling error is in neither). The noise of release k is drawn from the seed [seed, k] for every
  setting, so the plans of different epsilons differ by the noise scale only.

Without y (``design`` an array and ``y=None``) theta is assumed to have equal contributions per
feature, theta_k proportional to 1 / sqrt(G_kk), scaled so that theta^T G theta = R^2 y_ms,
and sigma^2 = (1 - R^2) y_ms, y_ms = ``y_rms``^2 (default (B_y / 2)^2): one block per value of
``r2``, so the plan shows the range.

Planning spends no budget, but everything it reads is treated as public: the pilot rows must be
public (public data, synthetic rows, an older data set whose release is allowed), or the
earlier release (already noisy and paid for). The plan must not be made from the holders' own
private rows: the planned numbers, and the epsilon chosen from them, would then reveal them.

Example::

    import bayesdp
    sim = bayesdp.simulate(n=100_000, d=5, seed=1)
    pilot = slice(0, 1000)                                    # public rows, e.g. an old survey
    table = bayesdp.plan(sim.X[pilot], sim.y[pilot], n=100_000, bounds=sim.bounds, nodes=5,
                         epsilon=[1.0, 10.0], delta=1e-5)
    print(table)
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import numpy as np

from .errors import BayesdpInputError, check_seed

#: R^2 values a plan without y shows (one block each)
DEFAULT_R2 = (0.2, 0.5, 0.8)
#: the smallest epsilon the inverse search tries
EPSILON_MIN = 1e-3
_SEARCH_STEPS = 7  # bisection steps in log epsilon between two grid points (1.2% apart)
_PLAN_METHODS = ("eiv", "fast")  # the closed-form methods: a plan fits `releases` releases


class Population(NamedTuple):
    """What a plan assumes about the holders' rows (module docstring).

    G : (D, D) the second moment W^T W / m of a design row w (x, or [1, x] with an intercept)
    theta : (D,) the coefficients; sigma2 : the variance of y given w
    names : the D coefficient names; intercept : bool; bounds : (B_x, B_y)
    r2 : the assumed R^2 (None: theta and sigma^2 were estimated from y or a release)
    source : one line saying where G, theta and sigma^2 come from
    rows : (W, y) the pilot's clipped design rows and responses (y None with r2), which each
        simulated release resamples (the bootstrap); None for an earlier release
    y_ms : the assumed mean square of y (with r2)
    """

    G: np.ndarray
    theta: np.ndarray
    sigma2: float
    names: tuple
    intercept: bool
    bounds: tuple
    r2: Optional[float]
    source: str
    rows: Optional[tuple] = None
    y_ms: Optional[float] = None


class EpsilonPlan(NamedTuple):
    """The answer of :func:`smallest_epsilon`.

    epsilon : the smallest epsilon (within 1.2%, rounded up to 3 digits) at which every named
        coefficient reaches the target, or None when none up to ``max_epsilon`` does
    nodes : J; reached : bool
    reason : why not (None when reached): the rows n, the holders J or the bounds
    table : the plan (:func:`plan`'s table) at ``epsilon``, or at ``max_epsilon`` when not reached
    """

    epsilon: Optional[float]
    nodes: int
    reached: bool
    reason: Optional[str]
    table: object


def plan(design, y=None, *, n=None, bounds=None, nodes=None, epsilon, delta, method="eiv",
         formula=None, intercept=False, include_yty=True, calibration="exact", releases=40,
         r2=None, y_rms=None, seed=0, num_samples=1000, prob=0.9, **options):
    """The expected fit, per coefficient, of a release not yet made.

    Parameters
    ----------
    design : (m, d) array or DataFrame of public pilot rows, a table with ``formula``, or a Release
        Public rows like the holders' (module docstring: the pilot must itself be public), or an
        earlier :class:`~bayesdp.Release` of the same holders (its noisy S and z, already paid
        for; n, bounds and nodes default to its own).
    y : (m,) array or None
        The pilot's responses; None assumes ``r2`` (below). With ``formula`` the response is the
        formula's left side.
    n : int
        Rows over all the holders of the planned release.
    bounds : (B_x, B_y), or with ``formula`` the declared ``{column: (lo, hi) | [levels]}``
        The public bounds the release will use (as in :func:`bayesdp.release`).
    nodes : int or list of int
        Holders J (one block per value); default 1 (an earlier release: its own J).
    epsilon : float or list of float; delta : float
        Privacy parameters of the planned release, per holder (one block per epsilon).
    method : "eiv" | "fast"
        The method the release will be fitted with (the closed-form ones).
    formula, intercept, include_yty, calibration
        As in :func:`bayesdp.release`.
    releases : int
        Simulated releases per setting. One release's posterior sd can vary by a factor of 3
        between releases (where the noise swamps a direction of X^T X), so the mean of 40 is
        within about 10% of the expected sd there, and within 2-3% where it does not.
    r2 : float or list of float, default (0.2, 0.5, 0.8) without y
        The assumed R^2 of y on x when the pilot has no y (one block per value).
    y_rms : float or None
        The assumed root mean square of y without y (default B_y / 2).
    seed : int
        Seed of the simulated data noise and release noise (the same for every setting).
    num_samples : int
        Posterior draws per simulated fit (for the interval's quantiles).
    prob : float
        The interval's probability (equal-tailed, as in the fit's table).
    **options
        Method options, as for :func:`bayesdp.fit`.

    Returns
    -------
    pandas DataFrame indexed by (epsilon, nodes, [r2,] feature), with columns ``theta`` (the
    coefficient the plan assumes), ``sd`` (the expected posterior sd), ``prior share``
    (eiv, fast: the share of the sd^2 that the prior supplies; near 1 the release will not
    determine the coefficient), ``90% half-width``, ``rmse`` (of the posterior mean) and
    ``rmse adassp`` (adaSSP's at the same settings; NaN with an intercept), both against the
    non-private least-squares fit of the same rows, and ``noise sd``
    (sigma of the release). ``table.attrs`` records the assumptions (``assumes``), n, delta,
    the method and the number of releases.
    """
    import pandas as pd

    settings = _settings(design, y, n, bounds, nodes, formula, intercept, r2, y_rms, epsilon,
                         delta, method, releases, seed, num_samples, prob, options)
    pops, n, Js, epsilons = settings["populations"], settings["n"], settings["nodes"], \
        settings["epsilons"]
    blocks = []
    for eps in epsilons:
        for J in Js:
            for pop in pops:
                blocks.append(_block(pop, eps, J, settings, include_yty, calibration))
    table = pd.concat(blocks)
    table.attrs.update({
        "assumes": [p.source for p in pops], "n": n, "delta": settings["delta"],
        "method": method, "releases": settings["releases"], "prob": prob,
        "pilot": "public by assumption: planning reads it and spends no budget",
    })
    return table


def smallest_epsilon(design, y=None, *, n=None, bounds=None, nodes=None, delta,
                     target_sd=None, target_prior_share=None, coefficients=None,
                     max_epsilon=100.0, method="eiv", formula=None, intercept=False,
                     include_yty=True, calibration="exact", releases=40, r2=None, y_rms=None,
                     seed=0, num_samples=1000, **options) -> EpsilonPlan:
    """The smallest epsilon (at ``delta``, J = ``nodes``, n) at which every coefficient of
    ``coefficients`` (default all) has a planned sd at most ``target_sd`` and a planned prior
    share at most ``target_prior_share`` (either or both), on :func:`plan`: a scan up a grid of
    three epsilons per factor of 10 over [EPSILON_MIN, ``max_epsilon``] finds the first that
    reaches it, and bisection in log epsilon refines it against the grid point below (the
    planned sd need not fall monotonically with epsilon: a coefficient the prior dominates can
    widen). The same noise, scaled, at every epsilon. With ``r2`` ranges, every R^2 must
    reach it.

    When none up to ``max_epsilon`` does, ``reason`` says why: the plan without the release's
    noise (epsilon -> infinity) still misses the target (n rows do not determine the
    coefficients), or the noise at ``max_epsilon`` (its scale grows with the bounds, and each
    holder's share n / J of the rows shrinks with J) still swamps them.

    Other parameters as for :func:`plan`; ``nodes`` one int. Returns :class:`EpsilonPlan`.
    """
    if target_sd is None and target_prior_share is None:
        raise BayesdpInputError("smallest_epsilon: give target_sd, target_prior_share or both")
    for name, v in (("target_sd", target_sd), ("target_prior_share", target_prior_share)):
        if v is not None and not (_is_number(v) and v > 0):
            raise BayesdpInputError(f"{name} must be a number > 0, got {v!r}")
    if not (_is_number(max_epsilon) and max_epsilon > EPSILON_MIN):
        raise BayesdpInputError(f"max_epsilon must be a number > {EPSILON_MIN:g}, got "
                                f"{max_epsilon!r}")
    if nodes is None:
        nodes = design.J if _is_release(design) else 1
    if not _whole(nodes, 1):
        raise BayesdpInputError(f"nodes: smallest_epsilon plans one holder count J (a whole "
                                f"number >= 1), got {nodes!r}")
    base = _settings(design, y, n, bounds, nodes, formula, intercept, r2, y_rms, max_epsilon,
                     delta, method, releases, seed, num_samples, 0.9, options)
    names = base["populations"][0].names
    wanted = list(names) if coefficients is None else [str(c) for c in coefficients]
    unknown = [c for c in wanted if c not in names]
    if unknown or not wanted:
        raise BayesdpInputError(f"coefficients: {unknown or wanted} not among the features "
                                f"{list(names)}")

    def evaluate(eps, noise=1.0):
        tables = [_block(p, eps, int(nodes), base, include_yty, calibration, noise)
                  for p in base["populations"]]
        import pandas as pd

        table = pd.concat(tables)
        rows = table[table.index.get_level_values("feature").isin(wanted)]
        miss = []
        if target_sd is not None:
            miss += [f"sd of {f} {v:.3g} > {target_sd:g}" for f, v in
                     zip(rows.index.get_level_values("feature"), rows["sd"]) if not v <= target_sd]
        if target_prior_share is not None:
            miss += [f"prior share of {f} {v:.2f} > {target_prior_share:g}" for f, v in
                     zip(rows.index.get_level_values("feature"), rows["prior share"])
                     if not v <= target_prior_share]
        table.attrs.update({"n": base["n"], "delta": base["delta"], "method": method,
                            "releases": base["releases"], "prob": 0.9,
                            "assumes": [p.source for p in base["populations"]]})
        return not miss, miss, table

    # a scan up a grid of 3 epsilons per factor of 10, then bisection in log epsilon between
    # the last grid point that misses and the first that reaches the target (the planned sd
    # need not fall monotonically: a coefficient the prior dominates can widen as the common
    # prior scale follows the others)
    grid = np.exp(np.linspace(math.log(EPSILON_MIN), math.log(float(max_epsilon)),
                              int(math.ceil(3 * math.log10(max_epsilon / EPSILON_MIN))) + 1))
    previous = None
    for eps in grid:
        ok, miss, table = evaluate(float(eps))
        if ok:
            break
        previous = float(eps)
    if not ok:
        free, free_miss, _ = evaluate(float(max_epsilon), noise=1e-6)
        nj = base["n"] // int(nodes)
        if not free:
            why = (f"even without the release's noise (epsilon -> infinity) the plan misses it "
                   f"({'; '.join(free_miss[:3])}): n = {base['n']} rows do not determine these "
                   "coefficients that well; more rows or a looser target")
        else:
            bx, by = base["populations"][0].bounds
            why = (f"at epsilon = {max_epsilon:g} the release's noise (sd "
                   f"{table['noise sd'].iloc[0]:.4g}, from the bounds B_x = {bx:g}, "
                   f"B_y = {by:g}) still swamps each holder's n / J = {nj} rows "
                   f"({'; '.join(miss[:3])}); without the noise the target is met: fewer "
                   "holders (J), tighter bounds or more rows would help")
        return EpsilonPlan(None, int(nodes), False, why, table)
    if previous is None:
        return EpsilonPlan(float(grid[0]), int(nodes), True, None, table)
    lo, hi = math.log(previous), math.log(float(eps))
    for _ in range(_SEARCH_STEPS):
        mid = 0.5 * (lo + hi)
        ok, _, t = evaluate(math.exp(mid))
        if ok:
            hi, table = mid, t
        else:
            lo = mid
    return EpsilonPlan(_round_up(math.exp(hi)), int(nodes), True, None, table)


# --- what the plan assumes -------------------------------------------------------------------

def _settings(design, y, n, bounds, nodes, formula, intercept, r2, y_rms, epsilon, delta,
              method, releases, seed, num_samples, prob, options):
    """Check the arguments of :func:`plan` and read the populations they describe."""
    from . import privacy
    from .releases import Release

    if method not in _PLAN_METHODS:
        raise BayesdpInputError(
            f"method {method!r}: a plan fits many simulated releases, so it takes the closed-form "
            f"methods {list(_PLAN_METHODS)}; the sampling methods share eiv's or fast's "
            "likelihood, so plan with the one whose treatment of S they share")
    epsilons = _list_of(epsilon, "epsilon")
    for e in epsilons:
        privacy.check_epsilon_delta(e, delta)
    if isinstance(design, Release):
        rel = design
        if formula is not None or y is not None:
            raise BayesdpInputError("design: an earlier Release carries its own statistics; "
                                    "leave y and formula out")
        if bounds is not None and tuple(map(float, bounds)) != tuple(rel.bounds or ()):
            raise BayesdpInputError(f"bounds: the earlier release used {rel.bounds}; a plan from "
                                    "it keeps them (leave bounds out)")
        if rel.bounds is None:
            raise BayesdpInputError("design: this release records no bounds; a plan needs the "
                                    "public bounds the planned release will use")
        n = rel.n_total if n is None else n
        nodes = rel.J if nodes is None else nodes
        pops = [_population_of_release(rel, options)]
    else:
        pops = _populations_of_rows(design, y, bounds, formula, intercept, r2, y_rms)
    if not _whole(n, 1):
        raise BayesdpInputError(f"n must be a whole number >= 1 (rows over all the holders), "
                                f"got {n!r}")
    Js = _list_of(1 if nodes is None else nodes, "nodes", whole=True)
    for J in Js:
        if J > n:
            raise BayesdpInputError(f"nodes: J = {J} holders cannot share n = {n} rows")
    if not _whole(releases, 2):
        raise BayesdpInputError(f"releases must be a whole number >= 2, got {releases!r}")
    if not _whole(num_samples, 100):
        raise BayesdpInputError(f"num_samples must be a whole number >= 100, got "
                                f"{num_samples!r}")
    if not (_is_number(prob) and 0 < prob < 1):
        raise BayesdpInputError(f"prob must be a number in (0, 1), got {prob!r}")
    seed = check_seed(seed)
    from .inference.methods import get_method

    get_method(method).with_options(options)  # names an option the method does not take
    return {"populations": pops, "n": int(n), "nodes": Js, "epsilons": epsilons,
            "delta": float(delta), "method": method, "releases": int(releases),
            "seed": 0 if seed is None else seed, "num_samples": int(num_samples),
            "prob": float(prob), "options": dict(options)}


def _populations_of_rows(design, y, bounds, formula, intercept, r2, y_rms):
    """The populations of pilot rows: one (estimated from y) or one per assumed R^2."""
    from . import privacy
    from .releases.rows import check_rows, dataframe_names

    if formula is not None:
        from .releases.formula import TableEncoding

        if y is not None:
            raise BayesdpInputError("y: with a formula the response is the formula's left side")
        enc = TableEncoding.build(formula, bounds)
        X, y, _ = enc.encode(design)
        names, intercept, (bx, by) = tuple(enc.feature_names), enc.intercept, enc.bounds
    else:
        names = dataframe_names(design) if hasattr(design, "columns") else None
        if y is None:
            X = check_rows(design, np.zeros(len(design)))[0]
        else:
            X, y = check_rows(design, y)
        if bounds is None:
            raise BayesdpInputError("bounds: a plan needs the public bounds (B_x, B_y) the "
                                    "release will use")
        if isinstance(bounds, str):
            raise BayesdpInputError(f"bounds={bounds!r}: a plan needs the public bounds "
                                    "(B_x, B_y) the release will use (private bounds cost "
                                    "a share of epsilon; plan with the bounds you expect)")
        bx, by = privacy.check_bounds(bounds)
        names = tuple(names) if names else tuple(f"x{i}" for i in range(X.shape[1]))
    m, d = X.shape
    if m < 2:
        raise BayesdpInputError(f"design: a pilot needs at least 2 rows, got {m}")
    Xc, yc, _ = privacy.clip_rows(X, np.zeros(m) if y is None else y, bx, by)
    W = np.hstack([np.ones((m, 1)), Xc]) if intercept else Xc
    names = (("intercept",) if intercept else ()) + tuple(names)
    if y is not None:
        if r2 is not None or y_rms is not None:
            raise BayesdpInputError("r2, y_rms: the pilot has y, so the plan estimates theta "
                                    "and sigma_y^2 from it; leave r2 and y_rms out")
        G, theta, sigma2 = _moments(W, yc, by)
        src = (f"the pilot's {m} rows (resampled per simulated release): their second moments, "
               f"and their least-squares theta and sigma_y^2 = {sigma2:.4g}")
        return [Population(G, theta, sigma2, names, bool(intercept), (bx, by), None, src,
                           (W, yc))]
    values = DEFAULT_R2 if r2 is None else _list_of(r2, "r2")
    if any(not 0 <= v < 1 for v in values):
        raise BayesdpInputError(f"r2 must lie in [0, 1), got {r2!r}")
    rms = by / 2 if y_rms is None else y_rms
    if not (_is_number(rms) and 0 < rms <= by):
        raise BayesdpInputError(f"y_rms must be a number in (0, B_y = {by:g}], got {y_rms!r}")
    pops = []
    for v in values:
        G, theta, sigma2 = _moments(W, None, by, v, rms ** 2)
        src = (f"the pilot's {m} rows' second moments (resampled per simulated release); no y: "
               f"R^2 = {v:g}, y's rms {rms:g}, theta with equal contributions per feature "
               "(theta_k ~ 1/sd(x_k))")
        pops.append(Population(G, theta, sigma2, names, bool(intercept), (bx, by), float(v),
                               src, (W, None), rms ** 2))
    return pops


def _moments(W, y, by, r2=None, y_ms=None):
    """(G, theta, sigma^2) of design rows W: G = W^T W / m; with y the least-squares theta and
    the residual variance (at most B_y^2); without, theta_k ~ 1 / sqrt(G_kk) scaled to
    theta^T G theta = r2 y_ms and sigma^2 = (1 - r2) y_ms."""
    m, D = W.shape
    G = W.T @ W / m
    if y is None:
        direction = 1.0 / np.sqrt(np.maximum(np.diag(G), 1e-300))
        theta = direction * math.sqrt(r2 * y_ms / max(float(direction @ G @ direction), 1e-300))
        return G, theta, (1 - r2) * y_ms
    ridge = 1e-10 * max(np.trace(G), 1e-300)
    theta = np.linalg.solve(G + ridge * np.eye(D), W.T @ y / m)
    resid = y - W @ theta
    return G, theta, float(min(resid @ resid / max(m - D, 1), by ** 2))


def _resampled(pop, rng):
    """(G, theta, sigma^2) of a bootstrap resample of the pilot's rows (the pilot's own
    uncertainty), or the population's when it has no rows."""
    if pop.rows is None:
        return pop.G, pop.theta, pop.sigma2
    W, y = pop.rows
    idx = rng.integers(len(W), size=len(W))
    return _moments(W[idx], None if y is None else y[idx], pop.bounds[1], pop.r2, pop.y_ms)


def _population_of_release(rel, options):
    """The population of an earlier release: G from its pooled noisy S (nearest PSD), theta and
    sigma_y^2 its "eiv" posterior means."""
    from .inference.closed_form import nearest_psd

    G = nearest_psd(np.asarray(rel.S_hat).sum(axis=0)) / rel.n_total
    post = _run(rel, "eiv", 0, 1000, {})
    theta = post.posterior["theta"].reshape(-1, rel.d).mean(axis=0)
    sigma2 = float(np.mean(post.posterior["sigma_y2"]))
    src = (f"an earlier release ({rel.J} holders, {rel.n_total} rows): its noisy S, and its "
           f"eiv posterior means of theta and sigma_y^2 = {sigma2:.4g}")
    return Population(G, theta, sigma2, tuple(rel.feature_names), bool(rel.intercept),
                      tuple(rel.bounds), None, src)


# --- one setting -------------------------------------------------------------------------------

def _block(pop, eps, J, s, include_yty, calibration, noise=1.0):
    """The plan of one setting (eps, J) for one population: ``s['releases']`` simulated
    releases fitted by the method's runner. ``noise`` scales the release's noise (0: the fit
    without it, for the inverse's explanation)."""
    import pandas as pd

    from .inference.adassp import adassp_from_sums
    from .releases.mechanism import symmetric_noise

    D = len(pop.theta)
    template = _template(pop, eps, s["delta"], J, include_yty, calibration)
    sigma = float(template.sigma_s[0]) * noise
    nj = np.full(J, s["n"] // J)
    nj[:s["n"] % J] += 1
    lo_q, hi_q = (1 - s["prob"]) / 2, (1 + s["prob"]) / 2
    sd, share, half, err, err_ada = (np.empty((s["releases"], D)) for _ in range(5))
    for k in range(s["releases"]):
        rng = np.random.default_rng([s["seed"], k])
        G, theta, sigma2 = _resampled(pop, rng)
        w, U = np.linalg.eigh(0.5 * (G + G.T))
        root = U * np.sqrt(np.maximum(w, 0.0))  # G = root root^T
        S = nj[:, None, None] * G
        z = S @ theta + math.sqrt(sigma2) * np.sqrt(nj)[:, None] \
            * (rng.standard_normal((J, D)) @ root.T)
        yty = nj * float(theta @ G @ theta) + 2 * (z - S @ theta) @ theta + nj * sigma2
        S_hat = S + sigma * np.stack([symmetric_noise(rng, D) for _ in range(J)])
        z_hat = z + sigma * rng.standard_normal((J, D))
        yty_hat = yty + sigma * rng.standard_normal(J) if include_yty else None
        rel = dataclasses.replace(template, S_hat=S_hat, z_hat=z_hat, n=nj, yty_hat=yty_hat,
                                  sigma_s=np.full(J, max(sigma, 1e-300)),
                                  sigma_z=np.full(J, max(sigma, 1e-300)),
                                  sigma_yty=np.full(J, max(sigma, 1e-300)) if include_yty
                                  else None)
        result = _run(rel, s["method"], int(rng.integers(2 ** 62)), s["num_samples"],
                      s["options"])
        draws = np.asarray(result.posterior["theta"]).reshape(-1, D)
        sd[k] = draws.std(axis=0, ddof=1)
        q_lo, q_hi = np.quantile(draws, [lo_q, hi_q], axis=0)
        half[k] = (q_hi - q_lo) / 2
        # against the non-private least squares of the same rows: what the noise costs
        theta_ls = np.linalg.solve(S.sum(axis=0), z.sum(axis=0))
        err[k] = draws.mean(axis=0) - theta_ls
        share[k] = np.asarray(result.attrs.get("prior_share", np.full(D, np.nan)), dtype=float)
        if pop.intercept:
            err_ada[k] = np.nan
        else:
            err_ada[k] = adassp_from_sums(S, z, epsilon=eps, delta=s["delta"],
                                          bounds=pop.bounds, rng=rng) - theta_ls
    keys = [(eps, J) + (() if pop.r2 is None else (pop.r2,)) + (f,) for f in pop.names]
    index = pd.MultiIndex.from_tuples(
        keys, names=["epsilon", "nodes"] + ([] if pop.r2 is None else ["r2"]) + ["feature"])
    return pd.DataFrame({
        "theta": pop.theta, "sd": sd.mean(axis=0),
        "sd 10%": np.quantile(sd, 0.1, axis=0), "sd 90%": np.quantile(sd, 0.9, axis=0),
        "prior share": share.mean(axis=0),
        f"{100 * s['prob']:g}% half-width": half.mean(axis=0),
        "rmse": np.sqrt((err ** 2).mean(axis=0)),
        "rmse adassp": np.sqrt((err_ada ** 2).mean(axis=0)),
        "noise sd": sigma,
    }, index=index)


def _template(pop, eps, delta, J, include_yty, calibration):
    """A release of J holders by the mechanism of these settings (its noise scale, names,
    bounds and privacy record), made by :class:`~bayesdp.releases.PartialStatistics` from two
    zero rows per holder; the plan replaces its statistics."""
    import warnings

    from .releases import PartialStatistics

    d = len(pop.names) - int(pop.intercept)
    acc = PartialStatistics(d, pop.bounds, J, intercept=pop.intercept,
                            feature_names=list(pop.names[int(pop.intercept):]))
    acc.add(np.zeros((2 * J, d)), np.zeros(2 * J), np.repeat(np.arange(J), 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # calibration warnings are the real release's to give
        return acc.release(epsilon=eps, delta=delta, seed=0, calibration=calibration,
                           include_yty=include_yty)


def _run(rel, method, seed, num_samples, options):
    """The method's runner on ``rel``, as :func:`bayesdp.fit` runs it (no derived groups, no
    checks): its :class:`~bayesdp.inference.methods.MethodResult`."""
    from .inference.fit import prepare_fit
    from .inference.methods import get_method

    rel, seed, priors = prepare_fit(rel, method, seed, None, num_samples, 1, 0)
    record = get_method(method)
    return record.run(rel, priors, seed=seed, num_samples=num_samples, num_chains=1,
                      num_warmup=0, progress_bar=False, **record.with_options(options))


# --- small checks ------------------------------------------------------------------------------

def _is_release(design):
    from .releases import Release

    return isinstance(design, Release)


def _is_number(v):
    return not isinstance(v, (bool, str)) and isinstance(v, (int, float, np.integer, np.floating)) \
        and math.isfinite(float(v))


def _whole(v, minimum):
    return not isinstance(v, bool) and isinstance(v, (int, np.integer)) and int(v) >= minimum


def _list_of(values, name, whole=False):
    """A number or a non-empty list of them, as a list (whole numbers >= 1 with ``whole``)."""
    items = list(values) if isinstance(values, (list, tuple, np.ndarray)) else [values]
    ok = (lambda v: _whole(v, 1)) if whole else _is_number
    if not items or not all(ok(v) for v in items):
        what = "whole numbers >= 1" if whole else "numbers"
        raise BayesdpInputError(f"{name} must be one of {what} or a list of them, got "
                                f"{values!r}")
    return [int(v) for v in items] if whole else [float(v) for v in items]


def _round_up(eps):
    """epsilon rounded up to 3 significant digits."""
    e = math.floor(math.log10(eps)) - 2
    return math.ceil(eps / 10 ** e) * 10 ** e
