"""What the network adapters share: the verdict on a protocol's privacy claim and the one-holder
release of a network's output (docs/adapters/)."""

from __future__ import annotations

import numpy as np

from ..accounting import unaccounted_part
from ..releases import Release


def claim_verdict(reasons, note, failed):
    """(dp_claim_valid, dp_claim_note) of a protocol's privacy claim: valid when ``reasons`` (why
    the claim fails for these settings) is empty; otherwise ``failed`` (what fails), the reasons
    and then ``note``."""
    if reasons:
        return False, failed + ": " + "; ".join(reasons) + ". " + note
    return True, note


def one_holder_release(S_hat, z_hat, n, sigma_s, sigma_z=None, *, cost_note, **fields):
    """A :class:`bayesdp.Release` with one holder, the network (docs/adapters/): S_hat (d, d),
    z_hat (d,), n rows, noise standard deviations sigma_s and sigma_z (docs/release-format.md;
    sigma_z None: isotropic noise, sigma_z = sigma_s).
    The protocol's privacy cost is recorded as not accounted, ``cost_note`` saying why;
    ``fields`` are the other Release fields (e.g. ``noise_cov`` of shape (1, D, D))."""
    sigma_z = sigma_s if sigma_z is None else sigma_z
    return Release(S_hat=np.asarray(S_hat)[None], z_hat=np.asarray(z_hat)[None],
                   n=np.array([n]), sigma_s=np.array([sigma_s]), sigma_z=np.array([sigma_z]),
                   privacy_cost=(unaccounted_part(cost_note),), **fields)
