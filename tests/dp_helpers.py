"""Shared helpers for the privacy / release / closed-form / adaSSP tests (imported by them;
pyproject.toml's pytest pythonpath puts this folder on sys.path)."""

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



def split_of(n, J, seed):
    """The holders a seeded release with a holder count J gives its n rows (split='random')."""
    from bayesdp.releases.holders import random_split, split_entropy, split_rng
    return random_split(n, J, split_rng(split_entropy(seed)))


def dask_split_of(sizes, J, seed):
    """The holders partial_statistics_dask(..., nodes=J, seed=seed) gives partitions of these
    sizes (each partition its own stream of the seed)."""
    from bayesdp.releases.holders import random_split, split_entropy, split_rng
    return np.concatenate([random_split(m, J, split_rng(split_entropy(seed), part=i))
                           for i, m in enumerate(sizes)])


def removals_and_adds(X, y, Xa, ya, at, J):
    """Neighbours of (X, y) as (X', y', f): every row removed in turn, and row k of (Xa, ya)
    added at position at[k] (holder k mod J); f maps the data set's holder labels to the
    neighbour's, every other row keeping its holder (the random split's coupling)."""
    out = [(np.delete(X, i, axis=0), np.delete(y, i), lambda L, i=i: np.delete(L, i))
           for i in range(len(y))]
    out += [(np.insert(X, i, Xa[k], axis=0), np.insert(y, i, ya[k]),
             lambda L, i=i, k=k: np.insert(L, i, k % J)) for k, i in enumerate(at)]
    return out


def coupled_changes(X, y, J, neighbours, bounds, **partial_kw):
    """L2 change of the noiseless sums [vech(S_j), z_j] of all J holders, data set -> each
    neighbour (X', y', f) of :func:`removals_and_adds`, under the random split's coupling
    (docs/privacy.md 3a): the data set's rows get random holders, the neighbour's f of them."""
    import bayesdp
    from bayesdp.releases.holders import random_split

    labels = random_split(len(y), J, np.random.default_rng(0))

    def whole(X, y, lab):
        acc = bayesdp.releases.PartialStatistics(X.shape[1], bounds, J, **partial_kw).add(X, y, lab)
        return np.concatenate([np.concatenate([vech(S), z]) for S, z in zip(acc.xtx, acc.xty)])

    base = whole(X, y, labels)
    return np.array([np.linalg.norm(base - whole(Xn, yn, f(labels))) for Xn, yn, f in neighbours])
