"""Packing helpers of the release layout used by the mechanism (to join
:mod:`bayesdp.releases.layout`)."""

import numpy as np


def unvech(v, d) -> np.ndarray:
    """The d x d symmetric matrix whose upper triangle incl. the diagonal, row by row, is ``v``
    (the inverse of vech)."""
    M = np.zeros((d, d))
    M[np.triu_indices(d)] = v
    return M + np.triu(M, 1).T
