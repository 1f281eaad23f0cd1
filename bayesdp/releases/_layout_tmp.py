"""Packing of the release layout [vech(S), z, y^T y] used by the mechanism
(docs/release-format.md)."""

import numpy as np


def unvech(v, d) -> np.ndarray:
    """The d x d symmetric matrix whose upper triangle incl. the diagonal, row by row, is ``v``
    (the inverse of vech)."""
    M = np.zeros((d, d))
    M[np.triu_indices(d)] = v
    return M + np.triu(M, 1).T
