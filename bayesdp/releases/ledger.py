"""A data holder's ledger: every release it made, their total privacy cost, and a cap that
refuses a release before its noise is drawn.

The ledger is a plain JSON file (docs/privacy.md, "A holder's ledger")::

    {"format": "bayesdp-ledger", "format_version": 1,
     "entries": [{"label": "release.json", "sha256": "...", "created": "...",
                  "holder_names": ["0"], "parts": [...]}, ...],
     "checksum": "<sha256 of the entries>"}

``parts`` are what a budget counts of the release (:func:`bayesdp.accounting.budget_parts`),
so the ledger's total is the one ``bayesdp budget`` prints for the same files
(:func:`bayesdp.accounting.compose_counted`; zCDP, delta the sum of the parts' deltas). The
checksum catches a corrupted or hand-edited file, which is refused, never reset; it is no
signature: whoever can write the file can rewrite it whole.

    ledger = bayesdp.Ledger("holder-ledger.json", cap=2.0)
    rel = bayesdp.release(X, y, epsilon=1.0, delta=1e-5, bounds=(3, 2), ledger=ledger)
    ledger.budget().epsilon        # 1.0; releases past a total of 2.0 are refused
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import hashlib
import json
import math
from pathlib import Path

from .. import accounting
from ..errors import BayesdpInputError

_FORMAT_NAME = "bayesdp-ledger"
_FORMAT_VERSION = 1

_GUARD = contextvars.ContextVar("bayesdp_ledger_guard", default=None)
"""The ledger whose cap the releases made in this context check before drawing noise
(:func:`guarding`, :func:`check_before_noise`)."""


class LedgerError(BayesdpInputError):
    """A ledger file that cannot be read as written (corrupted, edited), or a release refused
    by a ledger's cap."""


def _checksum(entries):
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Ledger:
    """One data holder's record of its releases, with an optional cap on their total epsilon.

    Parameters
    ----------
    path : str or Path
        The ledger file; it need not exist yet (it is written on the first :meth:`record`). An
        existing file is read and checked: a file that is not a ledger, is corrupted or was
        edited by hand raises :class:`LedgerError` and is left as it is.
    cap : float > 0 or None
        The largest total epsilon (at the total delta of :meth:`budget`) this holder may spend;
        None: no cap, the ledger only records.
    accountant : "zcdp" | "basic" | "pld"
        How the releases add up, as in :func:`bayesdp.accounting.budget` (default "zcdp", as
        ``bayesdp budget``: two Gaussian releases at (1, 1e-5) total 1.39 at delta 2e-5;
        "basic" adds the epsilons, 2).

    A release made with ``ledger=`` (:func:`bayesdp.release`, :func:`bayesdp.releases.release_file`)
    is checked against the cap with its exact cost before its noise is drawn
    (:meth:`check`), and recorded (:meth:`record`) before it is returned.
    """

    def __init__(self, path, cap=None, accountant="zcdp"):
        self.path = Path(path)
        self.accountant = accountant
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, (int, float)) \
                    or not math.isfinite(cap) or cap <= 0:
                raise BayesdpInputError(f"cap must be a finite epsilon > 0 or None, got {cap!r}")
            cap = float(cap)
        self.cap = cap
        self.entries = self._read()

    def _read(self):
        """The entries of the file at ``path`` (empty when it does not exist), checked."""
        if not self.path.exists():
            return ()
        where = f"ledger {str(self.path)!r}"
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise LedgerError(f"{where} cannot be read ({type(exc).__name__}: {exc}); it is "
                              "kept as it is: restore it from a copy (a ledger is never reset)"
                              ) from None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT_NAME \
                or doc.get("format_version") != _FORMAT_VERSION:
            raise LedgerError(f"{where} is not a bayesdp ledger (format {_FORMAT_NAME!r}, "
                              f"version {_FORMAT_VERSION})")
        entries = doc.get("entries")
        if not isinstance(entries, list) or doc.get("checksum") != _checksum(entries):
            raise LedgerError(f"{where} was edited or corrupted: its checksum does not match its "
                              "entries; it is kept as it is: restore it from a copy (a ledger "
                              "is never reset)")
        out = []
        for k, e in enumerate(entries):
            w = f"{where}: entries[{k}]"
            if not isinstance(e, dict) or not isinstance(e.get("label"), str) \
                    or not isinstance(e.get("sha256"), str) \
                    or not isinstance(e.get("holder_names"), list) \
                    or not isinstance(e.get("parts"), list) or not e["parts"]:
                raise LedgerError(f"{w} must hold a label, a sha256, holder_names and parts")
            names = [str(h) for h in e["holder_names"]]
            try:
                parts = [accounting.check_part(p, f"{w}.parts[{i}]", names)
                         for i, p in enumerate(e["parts"])]
            except BayesdpInputError as exc:
                raise LedgerError(str(exc)) from None
            out.append({**e, "holder_names": names, "parts": parts})
        return tuple(out)

    def budget(self, extra=()):
        """The total cost of the recorded releases (and of ``extra``, ``(label, parts,
        holder_names)`` entries not yet recorded): a :class:`bayesdp.accounting.Budget`, as
        ``bayesdp budget`` composes (its ``accountant``, the total delta the sum of the parts'
        deltas)."""
        return self.budget_at(None, extra)

    def budget_at(self, delta, extra=()):
        """:meth:`budget` at the total ``delta`` (None: the sum of the parts' deltas)."""
        entries = [(e["label"], e["parts"], e["holder_names"]) for e in self.entries]
        entries += list(extra)
        if not entries:
            raise BayesdpInputError(f"ledger {str(self.path)!r} records no release yet")
        return accounting.compose_counted(entries, delta=delta, accountant=self.accountant)

    def check(self, parts, holder_names, label="the new release"):
        """Refuse (:class:`LedgerError`) a release of cost ``parts`` (its holders
        ``holder_names``) whose total with the recorded ones would pass the cap; the message
        names the total it would reach and the largest epsilon that still fits."""
        if self.cap is None:
            return
        parts = [dict(p) for p in parts]
        total = self.budget([(label, parts, list(holder_names))])
        if total.epsilon <= self.cap * (1 + 1e-12):
            return
        raise LedgerError(
            f"cap: {label} would take this holder's total to epsilon = {total.epsilon:.6g} "
            f"(delta = {total.delta:g}, {len(self.entries) + 1} releases, "
            f"ledger {str(self.path)!r}), past the cap {self.cap:g}; "
            + _what_fits(self, parts, holder_names) + ". Nothing was released or written")

    def record(self, rel, label=None, text=None):
        """Add the release ``rel`` (its file's text ``text``, default what :meth:`Release.save`
        writes) to the ledger and write the file atomically; refuse (:class:`LedgerError`) a
        release already recorded (the same content hash) or one past the cap."""
        from .files import release_text, write_text_atomic

        text = release_text(rel) if text is None else text
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if any(e["sha256"] == sha for e in self.entries):
            raise LedgerError(f"ledger {str(self.path)!r} already records this release "
                              f"(sha256 {sha[:12]}...); a release counts once")
        parts = accounting.budget_parts(rel)
        label = label or f"release {len(self.entries)}"
        self.check(parts, rel.holder_names, label)
        entry = {"label": str(label), "sha256": sha,
                 "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec="seconds"),
                 "holder_names": list(rel.holder_names), "parts": parts}
        entries = [dict(e) for e in self.entries] + [entry]
        doc = {"format": _FORMAT_NAME, "format_version": _FORMAT_VERSION, "entries": entries,
               "checksum": _checksum(entries)}
        write_text_atomic(self.path, json.dumps(doc, indent=1, allow_nan=False) + "\n")
        self.entries = tuple(entries)
        return entry

    def __repr__(self):
        cap = "no cap" if self.cap is None else f"cap {self.cap:g}"
        return f"Ledger({str(self.path)!r}, {len(self.entries)} releases, {cap})"


def _what_fits(ledger, parts, holder_names):
    """The largest epsilon of a release like ``parts`` (each part at the same share of its
    epsilon) that still fits under the cap, in words."""
    names = list(holder_names)
    spent = ledger.budget().epsilon if ledger.entries else 0.0
    if spent >= ledger.cap:
        return f"the recorded releases already spend epsilon = {spent:.6g}: nothing fits"

    def fits(f):
        try:
            scaled = [_scaled(p, f) for p in parts]
            return ledger.budget([("x", scaled, names)]).epsilon <= ledger.cap
        except (BayesdpInputError, ArithmeticError):
            return False

    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    own = accounting.compose_counted([("x", parts, names)],
                                     accountant=ledger.accountant).epsilon
    return (f"the recorded releases spend epsilon = {spent:.6g}; a release of the same kind "
            f"fits up to epsilon = {lo * own:.4g}")


def _scaled(p, f):
    """Part ``p`` at a share ``f`` of its epsilon: a Gaussian part at the noise whose exact
    epsilon that is, any other part with its epsilon (and rho) scaled."""
    from .. import privacy

    q = dict(p)
    if p["epsilon"] is None:
        return q
    eps = p["epsilon"] * f
    if p["mechanism"] == "gaussian" and eps > 0:
        sigma = privacy.gaussian_sigma(eps, p["delta"], p["sensitivity"], "exact")
        return accounting.gaussian_part(sigma, p["sensitivity"], p["delta"],
                                        stated_epsilon=eps)
    q["epsilon"] = eps
    if q.get("rho") is not None:
        q["rho"] = p["rho"] * f * f
    return q


def spending(ledger, cap, make, label=None):
    """``make()`` (a function that makes a release) under the data holder's ledger: its cap
    checked before the noise is drawn (:func:`guarding`), the release recorded before it is
    returned. ``ledger`` None: just ``make()`` (then ``cap`` must be None)."""
    if ledger is None:
        if cap is not None:
            raise BayesdpInputError("cap: a cap needs a ledger (ledger=PATH) to add up to")
        return make()
    if isinstance(ledger, Ledger):
        if cap is not None and cap != ledger.cap:
            raise BayesdpInputError(f"cap: the Ledger carries its own cap ({ledger.cap!r}); "
                                    f"give cap there, not {cap!r} here")
    else:
        ledger = Ledger(ledger, cap=cap)
    with guarding(ledger):
        rel = make()
    ledger.record(rel, label)
    return rel


@contextlib.contextmanager
def guarding(ledger):
    """Within it, every release checks ``ledger``'s cap before drawing its noise
    (:func:`check_before_noise`); None: no check."""
    token = _GUARD.set(ledger)
    try:
        yield ledger
    finally:
        _GUARD.reset(token)


def check_before_noise(parts, holder_names):
    """Called by the mechanism with a release's exact cost parts just before it draws noise:
    refuse the release when the ledger of :func:`guarding` would pass its cap."""
    ledger = _GUARD.get()
    if ledger is not None:
        ledger.check(parts, holder_names)  # a new release's parts are what a budget counts
