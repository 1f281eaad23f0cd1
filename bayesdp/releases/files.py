"""The release file: JSON written and read as docs/release-format.md specifies, and the
atomic write every output file of bayesdp goes through.

:func:`release_to_dict` and :func:`release_from_dict` are the two directions of the format;
:func:`load_release` adds the checks of a file read from disk (UTF-8, valid JSON, finite
numbers), and every reading error names the JSON path of the bad field.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import tempfile
from pathlib import Path

import numpy as np

from .. import accounting, privacy, secure_noise
from ..errors import BayesdpInputError, ReleaseFormatError
from .cost import verify_cost
from .release_object import MAX_ABS, MAX_COUNT, Release

_FORMAT_NAME = "bayesdp-release"
_FORMAT_VERSION = 1

_NOISE_M = "symmetric; upper triangle including the diagonal iid N(0, 1), lower triangle mirrored"
_NOISE_V = "iid N(0, 1) per coordinate"


def write_atomic(path, write, *, overwrite=True) -> Path:
    """Write ``path`` through a temporary file beside it and an atomic rename, so that a failure
    leaves no partial file and an existing file unchanged. ``write(fd, tmp)`` writes the
    temporary file, open as the descriptor ``fd`` (``write`` closes it) at the path ``tmp``.
    The file gets the permissions the umask allows (it is for sharing). ``overwrite=False``
    refuses (BayesdpInputError) a ``path`` that exists, before writing and again at the moment
    of the rename (a hard link, which fails when the name exists), so an existing file is
    never replaced.

    The temporary file is ``.NAME.HOST.PID.XXXXXXXX.tmp`` (this machine's name and this
    process's id). A writer killed before its rename (kill -9, power loss) leaves it behind; the
    next write of the same target removes such leftovers whose writer is certainly gone: written
    on this machine by a process that no longer exists (:func:`_remove_stale_temporaries`).
    """
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise BayesdpInputError(f"path: folder {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise BayesdpInputError(f"path: {str(path)!r} is a folder; give a file name to write")
    if not overwrite and os.path.lexists(path):
        raise _exists_error(path)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path.name), suffix=".tmp",
                               dir=path.parent or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it owner-only
        write(fd, tmp)
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if path exists, atomically
            except FileExistsError:
                raise _exists_error(path) from None
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _exists_error(path):
    """The refusal to replace an existing file (``overwrite=False``)."""
    return BayesdpInputError(f"{str(path)!r} exists and is kept as it is (it may record a "
                             "privacy budget already spent); choose another name, or replace it "
                             "on purpose with overwrite=True (command line: --force)")


def _host_tag():
    """This machine's name as it goes into a temporary file's name: letters, digits and '-'."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname() or "host")[:32] or "host"


def _temporary_prefix(name, pid=None):
    """``.NAME.HOST.PID.``: the start of the name of a temporary file of :func:`write_atomic`."""
    return f".{name}.{_host_tag()}.{os.getpid() if pid is None else int(pid)}."


def _process_exists(pid):
    """False only when no process ``pid`` exists on this machine (a zombie still counts)."""
    if pid <= 0:
        return True  # not a process id a writer has: keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's), or cannot tell: keep the file
    return True


def _remove_stale_temporaries(path):
    """Remove the temporary files that an earlier :func:`write_atomic` of ``path`` left behind
    when its process died before the rename: those named ``.NAME.HOST.PID.XXXXXXXX.tmp`` with
    this machine's HOST and a PID that no longer exists. A live writer's file (its process
    exists: another process writing the same target right now, or this one), a file from
    another machine (its process cannot be checked from here) and files of any other name are
    kept. Best effort: a failure to list or remove is ignored (the write itself reports real
    problems)."""
    pattern = re.compile(re.escape(f".{path.name}.{_host_tag()}.") + r"(\d+)\.[^.]+\.tmp")
    folder = path.parent if str(path.parent) else Path(".")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or _process_exists(pid):
            continue
        try:
            os.unlink(folder / name)
        except OSError:
            pass


def write_text_atomic(path, text: str, *, overwrite=True) -> Path:
    """Write ``text`` to ``path`` as UTF-8, atomically (:func:`write_atomic`, ``overwrite`` as
    there)."""

    def write(fd, tmp):
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return write_atomic(path, write, overwrite=overwrite)


# -- writing ---------------------------------------------------------------------------------------


def release_to_dict(rel, include_clip_counts=False) -> dict:
    """The JSON-ready dictionary of the release file format (docs/release-format.md).

    ``n_clipped`` is an exact count of the holder's rows, not covered by the DP guarantee,
    so it is left out unless ``include_clip_counts`` is true.
    """
    holders = []
    for j in range(rel.J):
        h = {
            "name": rel.holder_names[j],
            "n": int(rel.n[j]),
            "S_hat": rel.S_hat[j].tolist(),
            "z_hat": rel.z_hat[j].tolist(),
            "sigma_s": float(rel.sigma_s[j]),
            "sigma_z": float(rel.sigma_z[j]),
        }
        if rel.n_rows is not None:
            h["n_rows"] = int(rel.n_rows[j])
        if include_clip_counts and rel.n_clipped is not None:
            h["n_clipped"] = int(rel.n_clipped[j])
        if include_clip_counts and rel.n_clamped is not None:
            h["n_clamped"] = {c: int(v) for c, v in zip(rel.table.numeric_columns,
                                                         rel.n_clamped[j])}
        if rel.yty_hat is not None:
            h["yty_hat"] = float(rel.yty_hat[j])
            h["sigma_yty"] = float(rel.sigma_yty[j])
        if rel.noise_cov is not None:
            h["noise_cov"] = rel.noise_cov[j].tolist()
        holders.append(h)
    shape = {}
    if rel.intercept:
        shape["intercept"] = True
    if rel.average_rows > 1:
        shape["average_rows"] = int(rel.average_rows)
    return {
        "format": _FORMAT_NAME,
        "format_version": _FORMAT_VERSION,
        "d": rel.d,
        "feature_names": list(rel.feature_names),
        **shape,
        **({} if rel.table is None else {"table": rel.table.to_dict()}),
        "holders": holders,
        "privacy": {
            "epsilon": rel.epsilon,
            "delta": rel.delta,
            "calibration": rel.calibration,
            "sensitivity": rel.sensitivity,
            "bounds": None if rel.bounds is None else {"x": rel.bounds[0], "y": rel.bounds[1]},
            "bounds_from_data": bool(rel.bounds_from_data),
            "neighbouring": privacy.NEIGHBOURING[privacy.split_kind(rel.provenance)],
            "public": privacy.PUBLIC[privacy.split_kind(rel.provenance)] + privacy.PUBLIC_ALWAYS
            + ("" if rel.table is None else privacy.PUBLIC_TABLE),
            "dp_claim_valid": bool(rel.dp_claim_valid),
            "dp_claim_note": rel.dp_claim_note,
            "cost": {"parts": [dict(p) for p in rel.privacy_cost],
                     "total": accounting.total_cost(rel.privacy_cost, rel.holder_names)},
        },
        "noise": _noise_section(rel),
        "provenance": {**rel.provenance, "seeded": bool(rel.seeded)},
    }


def _noise_section(rel) -> dict:
    if rel.noise_mechanism == secure_noise.MECHANISM:
        return {
            "mechanism": secure_noise.MECHANISM,
            "grid": rel.noise_grid,
            "M": "symmetric; upper triangle including the diagonal iid N_Z(0, s^2) on the "
                 "integers times grid (s = sigma_s / grid), lower triangle mirrored",
            "v": "iid N_Z(0, s^2) on the integers times grid per coordinate",
            "covariance": "iid: sigma_s on the upper triangle of S incl. diagonal, sigma_z "
                          "on z (sigma is the discrete Gaussian's scale parameter)",
            "rounding": "each row's contribution rounded to the nearest multiple of grid "
                        "before the exact integer sum; privacy.sensitivity includes the "
                        "rounding: Delta (1 + 1e-9) + grid sqrt(D)",
            "sampler": "exact discrete Gaussian (Canonne, Kamath & Steinke 2020, "
                       "Algorithms 1-3) driven by secrets.randbelow (the operating "
                       "system's CSPRNG); not seedable",
        }
    return {
        "mechanism": "gaussian",
        "M": _NOISE_M,
        "v": _NOISE_V,
        "covariance": "per holder noise_cov over [vech(S), z]"
        if rel.noise_cov is not None
        else "iid: sigma_s on the upper triangle of S incl. diagonal, sigma_z on z",
    }


def release_text(rel, include_clip_counts=False) -> str:
    """The text of ``rel``'s release file (what :func:`save_release` writes)."""
    return json.dumps(release_to_dict(rel, include_clip_counts), indent=1, allow_nan=False) + "\n"


def save_release(rel, path, include_clip_counts=False, overwrite=False) -> Path:
    """Write ``rel`` to ``path`` as JSON (:meth:`Release.save`); an existing ``path`` is
    refused unless ``overwrite``."""
    return write_text_atomic(path, release_text(rel, include_clip_counts), overwrite=overwrite)


# -- reading ---------------------------------------------------------------------------------------


def load_release(path, *, strict=True) -> Release:
    """Read a release file written by :meth:`Release.save` or by hand (docs/release-format.md).

    The release reports the privacy claim its recorded noise pays for (``Release.claim``,
    :func:`bayesdp.releases.cost.claim_of`), never a number only typed into the file. A file
    whose written ``privacy.epsilon`` / ``privacy.delta`` is stronger than its noise pays for,
    while it asserts the claim (``privacy.dp_claim_valid`` true or absent), is refused
    (ReleaseFormatError naming both numbers and the field); ``strict=False`` reads it with the
    claim recomputed from the noise and ``dp_claim_valid`` false. A file without a privacy
    record loads (the likelihood needs only the noise) with "no privacy claim" and
    ``dp_claim_valid`` false; a written claim weaker than the noise pays for is reported as
    written."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BayesdpInputError(f"release file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise BayesdpInputError(f"release file {str(path)!r} is a folder, not a file") from None
    except OSError as exc:
        raise BayesdpInputError(f"release file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReleaseFormatError(f"{path}: not a UTF-8 text file") from None
    try:
        doc = json.loads(text)  # NaN/Infinity/1e999 parse to non-finite floats, refused below
    except json.JSONDecodeError as exc:
        raise ReleaseFormatError(
            f"{path}: not valid JSON (truncated or corrupted?) at line {exc.lineno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ReleaseFormatError(f"{path}: JSON nested too deeply (a release file is at most "
                                 "a few levels deep)") from None
    where = _non_finite_field(doc)
    if where is not None:
        raise ReleaseFormatError(
            f"{path}: field {where} is not a finite number (NaN and Infinity are not allowed)"
        )
    try:
        return release_from_dict(doc, strict=strict)
    except ReleaseFormatError as exc:
        raise ReleaseFormatError(f"{path}: {exc}") from None
    except BayesdpInputError as exc:
        raise ReleaseFormatError(f"{path}: {exc}") from None


def _non_finite_field(obj, where=""):
    """JSON path (e.g. ``holders[0].S_hat[1][2]``) of the first non-finite number, or None.

    Iterative (depth-first, in document order), so nesting depth cannot exhaust the stack."""
    stack = [(obj, where)]
    while stack:
        x, w = stack.pop()
        if isinstance(x, float):
            if not math.isfinite(x):
                return w or "(top level)"
        elif isinstance(x, dict):
            items = [(f"{w}.{k}" if w else str(k), v) for k, v in x.items()]
            stack.extend(((v, kw) for kw, v in reversed(items)))
        elif isinstance(x, list):
            stack.extend(((x[i], f"{w}[{i}]") for i in range(len(x) - 1, -1, -1)))
    return None


def _bounds_from_data(pr):
    """``privacy.bounds_from_data`` (true: the bounds were read off the data, so the noise scale
    is not private); files written before it was named so say ``private_bounds`` (its
    negation: true when the bounds did not come from the data)."""
    if isinstance(pr, dict) and "bounds_from_data" not in pr and "private_bounds" in pr:
        return not _flag(pr, "private_bounds", True, "privacy.")
    return _flag(pr, "bounds_from_data", False, "privacy.")


def _flag(doc, key, default, where):
    """An optional JSON boolean (true/false only: a string "false" must not read as True)."""
    v = doc.get(key, default) if isinstance(doc, dict) else default
    if not isinstance(v, bool):
        raise ReleaseFormatError(f"field {where}{key} must be true or false, got {v!r}")
    return v


def _need(doc, key, where, kind=None):
    if not isinstance(doc, dict) or key not in doc:
        raise ReleaseFormatError(f"missing field {where}{key!r}")
    v = doc[key]
    if kind is not None and (not isinstance(v, kind) or (isinstance(v, bool) and kind is int)):
        raise ReleaseFormatError(f"field {where}{key!r} has the wrong type ({type(v).__name__})")
    return v


def release_from_dict(doc, *, strict=True) -> Release:
    """The :class:`Release` of a release file's dictionary (:func:`load_release`, which adds
    the checks of a file read from disk; ``strict`` as there)."""
    if not isinstance(doc, dict):
        raise ReleaseFormatError("top level must be a JSON object")
    if doc.get("format") != _FORMAT_NAME:
        raise ReleaseFormatError(f"field 'format' must be {_FORMAT_NAME!r}, "
                                 f"got {doc.get('format')!r}")
    version = _need(doc, "format_version", "", int)
    if version > _FORMAT_VERSION or version < 1:
        raise ReleaseFormatError(
            f"format_version {version} is not supported (this bayesdp reads 1..{_FORMAT_VERSION})"
        )
    d = _need(doc, "d", "", int)
    if d < 1:
        raise ReleaseFormatError(f"field 'd' must be >= 1, got {d}")
    names = doc.get("feature_names") or [f"x{i}" for i in range(d)]
    if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
        raise ReleaseFormatError(f"field 'feature_names' must be a list of {d} strings, got {names!r}")
    holders = _need(doc, "holders", "", list)
    if not holders:
        raise ReleaseFormatError("field 'holders' is empty")
    intercept = _flag(doc, "intercept", False, "")
    k = doc.get("average_rows", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ReleaseFormatError(f"field 'average_rows' must be a whole number >= 1, got {k!r}")
    if k > MAX_COUNT:  # a group holds at most as many rows as a holder can count
        raise ReleaseFormatError(f"field 'average_rows' must be at most 2**53, got {_short(k)}")
    table = _table_from_dict(doc.get("table"))
    S, z, n, ss, sz, hn = [], [], [], [], [], []
    clipped, yty, syty, cov, rows, clamped = [], [], [], [], [], []
    for j, h in enumerate(holders):
        w = f"holders[{j}]."
        Sj = _number_array(_need(h, "S_hat", w, list), w + "S_hat", 2)
        zj = _number_array(_need(h, "z_hat", w, list), w + "z_hat", 1)
        if Sj.shape != (d, d):
            raise ReleaseFormatError(f"{w}S_hat must be {d} x {d}, got shape {Sj.shape}")
        if zj.shape != (d,):
            raise ReleaseFormatError(f"{w}z_hat must have length {d}, got shape {zj.shape}")
        S.append(Sj)
        z.append(zj)
        n.append(_count(_need(h, "n", w), w + "n"))
        ss.append(_number(_need(h, "sigma_s", w), w + "sigma_s"))
        sz.append(_number(_need(h, "sigma_z", w), w + "sigma_z"))
        hn.append(str(h.get("name", j)))
        clipped.append(None if h.get("n_clipped") is None
                       else _count(h["n_clipped"], w + "n_clipped", minimum=0))
        rows.append(None if h.get("n_rows") is None else _count(h["n_rows"], w + "n_rows"))
        clamped.append(None if h.get("n_clamped") is None
                       else _clamped(h["n_clamped"], table, w + "n_clamped"))
        yty.append(None if h.get("yty_hat") is None else _number(h["yty_hat"], w + "yty_hat"))
        if h.get("yty_hat") is not None:
            syty.append(_number(_need(h, "sigma_yty", w), w + "sigma_yty"))
        elif h.get("sigma_yty") is not None:
            raise ReleaseFormatError(f"{w}sigma_yty is given without {w}yty_hat")
        cov.append(None if h.get("noise_cov") is None
                   else _number_array(h["noise_cov"], w + "noise_cov", 2))
    pr = doc.get("privacy") or {}
    if not isinstance(pr, dict) or not isinstance(doc.get("provenance") or {}, dict):
        raise ReleaseFormatError("fields 'privacy' and 'provenance' must be JSON objects")
    prov = dict(doc.get("provenance") or {})
    seeded = _flag(prov, "seeded", False, "provenance.")
    prov.pop("seeded", None)
    b = pr.get("bounds")
    bounds = None if b is None else (
        _number(_need(b, "x", "privacy.bounds."), "privacy.bounds.x"),
        _number(_need(b, "y", "privacy.bounds."), "privacy.bounds.y"))
    for key in ("epsilon", "delta", "sensitivity"):
        if pr.get(key) is not None:
            _number(pr[key], "privacy." + key)
    if pr.get("calibration") is not None and not isinstance(pr["calibration"], str):
        raise ReleaseFormatError(
            f"privacy.calibration must be a string, got {pr['calibration']!r}")
    cost = pr.get("cost")
    parts = None
    if cost is not None:
        if not isinstance(cost, dict) or not isinstance(cost.get("parts"), list) \
                or not cost["parts"]:
            raise ReleaseFormatError("privacy.cost must be an object with a non-empty list "
                                     "'parts'")
        parts = []
        for i, p in enumerate(cost["parts"]):
            try:
                parts.append(accounting.check_part(p, f"privacy.cost.parts[{i}]", hn))
            except BayesdpInputError as exc:
                raise ReleaseFormatError(str(exc)) from None
    claim_valid = _flag(pr, "dp_claim_valid", bool(pr), "privacy.")
    claim_note = str(pr.get("dp_claim_note", ""))
    mech, grid = _noise_from_dict(doc.get("noise"))
    has = lambda lst: all(v is not None for v in lst)  # noqa: E731
    if any(v is not None for v in yty) and not has(yty):
        raise ReleaseFormatError("yty_hat must be given for every holder or for none")
    if any(v is not None for v in cov) and not has(cov):
        raise ReleaseFormatError("noise_cov must be given for every holder or for none")
    if any(v is not None for v in clipped) and not has(clipped):
        raise ReleaseFormatError("n_clipped must be given for every holder or for none")
    if any(v is not None for v in rows) and not has(rows):
        raise ReleaseFormatError("n_rows must be given for every holder or for none")
    if any(v is not None for v in clamped) and not has(clamped):
        raise ReleaseFormatError("n_clamped must be given for every holder or for none")
    try:
        rel = Release(
            S_hat=np.stack(S),
            z_hat=np.stack(z),
            n=np.array(n),
            sigma_s=np.array(ss),
            sigma_z=np.array(sz),
            feature_names=tuple(names),
            holder_names=tuple(hn),
            epsilon=pr.get("epsilon"),
            delta=pr.get("delta"),
            calibration=pr.get("calibration"),
            sensitivity=pr.get("sensitivity"),
            bounds=bounds,
            bounds_from_data=_bounds_from_data(pr),
            seeded=seeded,
            n_clipped=np.array(clipped) if has(clipped) else None,
            yty_hat=np.array(yty, dtype=float) if has(yty) else None,
            sigma_yty=np.array(syty, dtype=float) if has(yty) else None,
            noise_cov=np.stack(cov) if has(cov) and len({c.shape for c in cov}) == 1 else (
                None if not has(cov) else _ragged("noise_cov")),
            dp_claim_valid=claim_valid,
            dp_claim_note=claim_note,
            provenance=prov,
            intercept=intercept,
            average_rows=k,
            n_rows=np.array(rows) if has(rows) else None,
            privacy_cost=parts,
            noise_mechanism=mech,
            noise_grid=grid,
            table=table,
            n_clamped=np.array(clamped, dtype=np.int64) if has(clamped) else None,
        )
        # the record must agree with the cost the file's own noise, bounds and design give
        verify_cost(rel)
        if strict and claim_valid and rel.claim.status == "recomputed":
            raise ReleaseFormatError(_overclaim_message(rel, pr))
    except ReleaseFormatError:
        raise
    except BayesdpInputError as exc:
        raise ReleaseFormatError(str(exc)) from None
    return rel


def _overclaim_message(rel, pr):
    """The refusal of a file whose written claim is stronger than its noise pays for."""
    c = rel.claim
    fields = [f"privacy.{k} = {pr.get(k)!r}" for k, paid in (("epsilon", c.epsilon),
                                                               ("delta", c.delta))
              if float(pr.get(k)) < paid] or [f"privacy.epsilon = {pr.get('epsilon')!r} at "
                                              f"privacy.delta = {pr.get('delta')!r}"]
    return (f"{' and '.join(fields)} claims more than the file's noise pays for: epsilon = "
            f"{rel.claim.epsilon:.6g} at delta = {rel.claim.delta:g} (its sigmas, sensitivity "
            "and cost record; what 'bayesdp budget' reports). The claim was edited or the noise "
            "falls short of it; load_release(..., strict=False) reads the file with the claim "
            "its noise pays for")


def _table_from_dict(doc):
    """The :class:`~bayesdp.releases.formula.TableEncoding` of the file's "table" section
    (None without one), rebuilt from its formula and declared bounds and checked against the
    rest of the section."""
    if doc is None:
        return None
    from .formula import TableEncoding

    try:
        return TableEncoding.from_dict(doc)
    except BayesdpInputError as exc:
        text = str(exc)
        raise ReleaseFormatError(text if text.startswith("table") else f"table: {text}") from None


def _clamped(v, table, where):
    """A holder's ``n_clamped``: one whole number >= 0 per numeric column of the table."""
    if table is None:
        raise ReleaseFormatError(f"{where} is given without a 'table' section")
    cols = list(table.numeric_columns)
    if not isinstance(v, dict) or sorted(v) != sorted(cols):
        raise ReleaseFormatError(f"{where} must map each numeric column {cols} to a count, "
                                 f"got {v!r}")
    return [_count(v[c], f"{where}.{c}", minimum=0) for c in cols]


def _noise_from_dict(noise):
    """(mechanism, grid) from the file's "noise" section. Only "discrete_gaussian" is read (it
    needs ``noise.grid``); anything else, or no section (for float noise the section is
    informational), is float Gaussian noise."""
    if not isinstance(noise, dict) or noise.get("mechanism") != secure_noise.MECHANISM:
        return "gaussian", None
    return secure_noise.MECHANISM, _number(_need(noise, "grid", "noise."), "noise.grid")


def _number_array(v, where, ndim):
    """A rectangular ``ndim``-deep JSON list of numbers (not booleans, strings or null) with
    magnitudes up to MAX_ABS, as a float64 array; errors name the JSON path of the bad entry."""
    stack = [(v, where, 0)]
    while stack:  # iterative: deeply nested input must not hit Python's recursion limit
        x, w, depth = stack.pop()
        if isinstance(x, list):
            if depth >= ndim:
                raise ReleaseFormatError(f"{where} must be a {ndim}-d array of numbers; {w} is a "
                                         "list where a number belongs")
            stack.extend((x[i], f"{w}[{i}]", depth + 1) for i in range(len(x) - 1, -1, -1))
        elif depth < ndim:
            raise ReleaseFormatError(f"{where} must be a {ndim}-d array of numbers; {w} is "
                                     f"{x!r}, not a list")
        else:
            _number(x, w)
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ReleaseFormatError(f"{where} must be a rectangular array of numbers "
                                 "(rows of equal length)") from None
    if a.ndim != ndim:
        raise ReleaseFormatError(f"{where} must be a rectangular {ndim}-d array of numbers")
    return a


def _number(v, where):
    """A JSON number (not a boolean) of magnitude at most MAX_ABS, as a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ReleaseFormatError(f"{where} must be a number, got {v!r}")
    if abs(v) > MAX_ABS:
        raise ReleaseFormatError(
            f"{where} = {_short(v)} is too large: bayesdp accepts "
            f"magnitudes up to {MAX_ABS:g} (larger ones overflow float64 in the inference)")
    return float(v)


def _short(v):
    return f"{v:.3g}" if isinstance(v, float) else f"(a {len(str(abs(v)))}-digit integer)"


def _count(v, where, minimum=1):
    """A JSON whole number (not a boolean) in [minimum, MAX_COUNT]."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ReleaseFormatError(f"{where} must be a whole number, got {v!r}")
    if v > MAX_COUNT:
        raise ReleaseFormatError(f"{where} must be at most 2**53, got {_short(v)}")
    if v < minimum:
        raise ReleaseFormatError(
            f"{where} must be >= {minimum}" + (" (every holder needs n_j >= 1 rows)"
                                               if minimum == 1 else "") + f", got {v}")
    return v


def _ragged(field):
    raise ReleaseFormatError(f"{field} must have the same shape for every holder")
