"""Shared helpers for the privacy / release / closed-form / adaSSP tests (imported by them;
pytest puts this folder on sys.path)."""

import math

import numpy as np


def vech(S):
    """Upper triangle incl. diagonal, row-major (the order of the release format)."""
    return S[np.triu_indices(S.shape[-1])]


def stats_vector(X, y):
    """[vech(X^T X), X^T y] of a data set."""
    X = np.asarray(X, dtype=float)
    return np.concatenate([vech(X.T @ X), X.T @ np.asarray(y, dtype=float)])


def delta_sz(bx, by):
    return math.sqrt(bx**4 + bx**2 * by**2)


def rows_in_ball(rng, n, d, bx, by):
    """Random rows with ||x|| <= B_x and |y| <= B_y, some exactly on the bounds."""
    u = rng.normal(size=(n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    r = bx * rng.uniform(0, 1, size=n) ** (1 / d)
    r[: n // 5] = bx
    X = u * r[:, None]
    y = rng.uniform(-by, by, size=n)
    y[: n // 7] = by
    return X, y

