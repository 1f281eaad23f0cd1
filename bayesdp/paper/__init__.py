"""The paper's lab (Alparslan, Yildirim & Birbil, ICML 2023), above the core library:
:func:`compare` (section 5's grid of methods over epsilon, J and replications), the paper's
metrics (:mod:`.metrics`) and data sets (:mod:`.datasets`), MCMC-B&S (:mod:`.bs`,
:mod:`.bs_model`), Algorithms 1 and 2 as published (:mod:`.kernels`) and the NUTS cross-checks.

Importing it registers the paper's methods with ``bayesdp.fit`` (:mod:`.methods`): "bs",
"normalx-paper", "fixeds-paper", "nuts-normalx", "nuts-fixeds". The core never imports it.

    import bayesdp.paper
    df = bayesdp.paper.compare("simulated", methods=["fast", "bs", "normalx-paper"], reps=2)
"""

from . import methods  # noqa: F401  (registers the paper's methods with fit)
from .comparison import compare

__all__ = ["compare"]
