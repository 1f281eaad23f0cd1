"""The README's Python example: simulate, release, save, load, fit, compare with adaSSP."""

import bayesdp

sim = bayesdp.simulate(n=20_000, d=3, seed=1)  # the paper's simulation
rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5,  # one DP release per holder
                      bounds=sim.bounds, nodes=4)  # public bounds; rows clipped
rel.save("release.json", overwrite=True)  # what the holders send (default: never replace)
idata = bayesdp.fit(bayesdp.load_release("release.json"), seed=0)  # method="eiv", the default
print(idata.posterior["theta"].mean(("chain", "draw")).values, sim.theta)
est = bayesdp.adassp(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4, seed=2)
print(est)
print(bayesdp.privacy.analytic_gaussian_sigma(1.0, 1e-5))  # 3.73063...
