"""The demo's plot of theta (bayesdp.report): labelled axes, truth markers visible on top."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

import bayesdp  # noqa: E402
from bayesdp import report  # noqa: E402


@pytest.fixture(scope="module")
def posterior():
    sim = bayesdp.simulate(5000, 3, seed=4)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=1)
    return bayesdp.fit(rel, method="fast", seed=2, num_samples=400), sim.theta


def test_axes_are_labelled_and_the_truth_is_drawn_on_top(posterior):
    idata, theta = posterior
    fig, ax = plt.subplots()
    art = report.draw_theta(ax, idata, truth=theta, estimates={"other": theta + 0.1})
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip()
    interval = art["interval"]
    below = [interval.lines[0], *interval.lines[1], *interval.lines[2], art["other"]]
    assert all(art["truth"].get_zorder() > a.get_zorder() for a in below)
    # a marker edge of another colour than the face keeps it visible on a same-coloured line
    face = art["truth"].get_facecolor()[0]
    edge = art["truth"].get_edgecolor()[0]
    assert not np.allclose(face, edge) and art["truth"].get_linewidths()[0] > 0
    plt.close(fig)


def test_truth_marker_visible_where_it_falls_on_the_posterior_mean(posterior):
    """Truth placed exactly on each posterior mean: the rendered pixel there has the truth's
    colour, not the interval's."""
    idata, _ = posterior
    mean = np.asarray(report.theta_table(idata)["mean"])
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    art = report.draw_theta(ax, idata, truth=mean)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    want = np.array(to_rgba(art["truth"].get_facecolor()[0])[:3])
    h = img.shape[0]
    for k, m in enumerate(mean):
        x, y = ax.transData.transform((k, m))
        px = img[int(round(h - y)), int(round(x))]
        assert np.allclose(px, want, atol=0.15), (k, px, want)
    plt.close(fig)


def test_plot_theta_writes_a_png(posterior, tmp_path):
    idata, theta = posterior
    path = report.plot_theta(idata, tmp_path / "theta.png", truth=theta,
                             estimates={"adaSSP": theta})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fast_table_shows_the_exact_closed_form_not_moments_of_draws():
    """Issue 12 item 5: with 3 draws per chain the draws' moments are far from the closed form;
    the table's mean, sd and Gaussian quantiles are the closed form's to 1e-10."""
    from scipy import stats

    sim = bayesdp.simulate(3000, 3, seed=5)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=3)
    idata = bayesdp.fit(rel, method="fast", seed=0, num_samples=3, num_chains=1)
    post = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors().resolve(rel))
    sd = np.sqrt(np.diag(post["cov"]))
    table = report.theta_table(idata, prob=0.8)
    np.testing.assert_allclose(table["mean"], post["mean"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(table["sd"], sd, rtol=1e-10)
    np.testing.assert_allclose(table["eti_10%"], post["mean"] + stats.norm.ppf(0.1) * sd,
                               rtol=1e-10)
    np.testing.assert_allclose(table["eti_90%"], post["mean"] + stats.norm.ppf(0.9) * sd,
                               rtol=1e-10)
    draws = idata.posterior["theta"].values.reshape(-1, 3)
    assert not np.allclose(draws.std(axis=0, ddof=1), sd, rtol=1e-3)  # the draws' sd differs
    # an MCMC-like posterior (no closed form) keeps the moments of its draws
    nonpriv = bayesdp.fit_nonprivate(sim.X, sim.y, bounds=sim.bounds, seed=1, num_samples=5,
                                     num_chains=1)
    d = nonpriv.posterior["theta"].values.reshape(-1, 3)
    np.testing.assert_allclose(report.theta_table(nonpriv)["sd"], d.std(axis=0, ddof=1))


def test_the_note_names_the_coefficients_the_release_says_little_about():
    """Most prior shares above 0.5: one line names them; most below: no such line."""
    import pandas as pd

    from bayesdp import report

    vague = pd.DataFrame({"prior share": [0.84, 0.2, 0.95]}, index=["x0", "x1", "x2"])
    note = report.theta_table_note(vague)
    assert note.splitlines()[0] == ("the release says little about x0, x2: their intervals are "
                                    "mostly the prior's (prior share above 0.5)")
    clear = pd.DataFrame({"prior share": [0.84, 0.2, 0.1]}, index=["x0", "x1", "x2"])
    assert "says little about x0" not in report.theta_table_note(clear)
    assert report.theta_table_note(clear).startswith("prior share: the part")
