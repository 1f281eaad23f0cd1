"""The paper's real data sets (section 5.2), in the authors' CSVs or the original UCI formats.

``load_dataset(name_or_path, preprocessing="paper" | "sound", ...)`` returns a :class:`Dataset`
with training and test rows, the training least-squares fit (the reference of the estimation MSE)
and the bounds (B_x, B_y) read off the training rows.

Formats recognised (by content, not only by name):

- the authors' files (``power_plant_energy.csv``, ``bike_sharing.csv``, ``air_quality.csv``,
  ``3droad.csv``): no header, comma separated, last column y; empty trailing fields and all-empty
  rows are dropped (AirQuality has both);
- UCI Combined Cycle Power Plant ``Folds5x2_pp.xlsx`` (first sheet) or a CSV export (AT, V, AP,
  RH, PE);
- UCI Bike Sharing ``hour.csv`` (``instant`` and ``dteday`` are dropped; y = ``cnt``);
- UCI Air Quality ``AirQualityUCI.csv`` (``;`` separated, decimal commas, Date/Time dropped,
  trailing empty columns and rows dropped) or ``AirQualityUCI.xlsx``; y = AH (last column);
- UCI 3D Road Network ``3D_spatial_network.txt`` (no header: OSM_ID, LONGITUDE, LATITUDE,
  ALTITUDE; y = ALTITUDE, X = the first three columns, OSM_ID included as in the paper's d = 3).

Preprocessing ``"paper"`` (the authors' driver; docs/reproduction.md): NaN -> 0; every feature
z-scored with the mean and n-1 standard deviation of the **whole** file; y centred by its whole-file
mean and divided by its whole-file max |y|; train = first ceil(0.8 N) rows, test = the rest, no
shuffling; AirQuality's -200 missing-value code kept as a number; values read from the UCI
AirQuality originals are rounded to 2 decimals like the authors' CSV.

Preprocessing ``"sound"``: rows shuffled with ``seed`` before the 80/20 split; scaling (means,
standard deviations, max |y|) fitted on the training rows only and applied to both parts; the
-200 code treated as missing (columns more than half missing dropped, then incomplete rows).

Either way, the bounds are computed from the training data, so a release made with them is
**not** differentially private (``Dataset.bounds_from_data`` is True); the paper says the same.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from ..errors import BayesdpInputError

_PREPROCESSINGS = ("paper", "sound")

#: Canonical names -> (authors' file, UCI original file names), looked for in ``data_dir``.
_DATASETS = {
    "powerplant": ("power_plant_energy.csv", ("Folds5x2_pp.xlsx", "Folds5x2_pp.csv", "CCPP.csv")),
    "bikesharing": ("bike_sharing.csv", ("hour.csv",)),
    "airquality": ("air_quality.csv", ("AirQualityUCI.csv", "AirQualityUCI.xlsx")),
    "3droad": ("3droad.csv", ("3D_spatial_network.txt",)),
}
_ALIASES = {
    "power_plant": "powerplant", "power_plant_energy": "powerplant", "ccpp": "powerplant",
    "bike_sharing": "bikesharing", "bike": "bikesharing",
    "air_quality": "airquality", "air": "airquality",
    "3d_road": "3droad", "road3d": "3droad",
}
#: identifier / date columns dropped from headered files
_DROP_COLUMNS = {"instant", "dteday", "date", "time"}
_MISSING_CODE = -200.0

_DATA_BOUNDS_NOTE = ("bounds were computed from the training rows: a release made with them is "
                     "NOT differentially private (as in the paper)")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A preprocessed regression data set with an 80/20 split."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple
    theta_ols: np.ndarray
    bounds: tuple
    preprocessing: str
    source: str
    file_format: str
    bounds_from_data: bool = True
    notes: tuple = ()

    @property
    def d(self) -> int:
        return self.X_train.shape[1]

    @property
    def n_train(self) -> int:
        return self.X_train.shape[0]

    @property
    def delta(self) -> float:
        """The paper's delta = 1 / N_train."""
        return 1.0 / self.n_train


def dataset_names():
    return tuple(_DATASETS)


def canonical_name(name: str) -> Optional[str]:
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    if key in _DATASETS:
        return key
    plain = key.replace("_", "")
    return _ALIASES.get(key) or (plain if plain in _DATASETS else None)


def _default_data_dir() -> Optional[Path]:
    """``$BAYESDP_DATA_DIR`` if set, else None."""
    env = os.environ.get("BAYESDP_DATA_DIR")
    return Path(env) if env else None


def find_dataset_file(name, data_dir=None) -> Path:
    """The file of a named data set in ``data_dir`` (authors' CSV first, then UCI originals)."""
    canon = canonical_name(name)
    if canon is None:
        raise BayesdpInputError(f"data: unknown data set {name!r}; known: {sorted(_DATASETS)}")
    folder = Path(data_dir) if data_dir is not None else _default_data_dir()
    if folder is None:
        raise BayesdpInputError(
            f"data: no data_dir given and BAYESDP_DATA_DIR is not set; cannot find {canon!r}")
    authors, originals = _DATASETS[canon]
    for fname in (authors, *originals):
        if (folder / fname).is_file():
            return folder / fname
    raise BayesdpInputError(
        f"data: none of {[authors, *originals]} found in {str(folder)!r} for data set {canon!r}")


# -- reading -------------------------------------------------------------------------------------


def _read_xlsx_first_sheet(path) -> pd.DataFrame:
    """The first sheet of an .xlsx file as a DataFrame (first row = header).

    Uses pandas/openpyxl when installed, otherwise a small reader of the Office Open XML parts
    (shared strings, inline strings, numbers), which is all the UCI workbooks contain.
    """
    try:
        import openpyxl  # noqa: F401

        return pd.read_excel(path, sheet_name=0)
    except ImportError:
        pass
    ns = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
          "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships"}
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise BayesdpInputError(f"data: {str(path)!r} is not a readable .xlsx file") from None
    with zf:
        names = set(zf.namelist())
        wb = ET.fromstring(zf.read("xl/workbook.xml"))
        sheet = wb.find("m:sheets/m:sheet", ns)
        rid = sheet.get(f"{{{ns['r']}}}id")
        rels = ET.fromstring(zf.read("xl/_rels/workbook.xml.rels"))
        target = next(r.get("Target") for r in rels if r.get("Id") == rid)
        target = target.lstrip("/")
        sheet_path = target if target.startswith("xl/") else "xl/" + target
        shared = []
        if "xl/sharedStrings.xml" in names:
            for si in ET.fromstring(zf.read("xl/sharedStrings.xml")).findall("m:si", ns):
                shared.append("".join(t.text or "" for t in si.iter(f"{{{ns['m']}}}t")))
        root = ET.fromstring(zf.read(sheet_path))
    rows = {}
    for row in root.iter(f"{{{ns['m']}}}row"):
        for c in row.findall("m:c", ns):
            ref = c.get("r")
            col_letters = re.match(r"[A-Z]+", ref).group(0)
            col = 0
            for ch in col_letters:
                col = col * 26 + (ord(ch) - 64)
            r = int(ref[len(col_letters):])
            t = c.get("t")
            v = c.find("m:v", ns)
            if t == "s":
                val = shared[int(v.text)]
            elif t == "inlineStr":
                val = "".join(x.text or "" for x in c.iter(f"{{{ns['m']}}}t"))
            elif t in ("str", "b"):
                val = v.text if v is not None else None
            else:
                val = float(v.text) if v is not None and v.text is not None else np.nan
            rows.setdefault(r, {})[col - 1] = val
    if not rows:
        raise BayesdpInputError(f"data: {str(path)!r}: the first sheet is empty")
    first = min(rows)
    ncol = max(max(r) for r in rows.values()) + 1
    header = [str(rows[first].get(j, f"col{j}")) for j in range(ncol)]
    body = [[rows[r].get(j, np.nan) for j in range(ncol)] for r in sorted(rows) if r != first]
    return pd.DataFrame(body, columns=header)


def _first_line(path) -> str:
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                return line
    raise BayesdpInputError(f"data: {str(path)!r} is empty")


def read_regression_file(path):
    """Read a data file in any recognised format (see module docstring).

    Returns ``(X DataFrame, y Series, file_format, notes)``; columns are numeric, y is last.
    """
    path = Path(path)
    if not path.is_file():
        raise BayesdpInputError(f"data: file {str(path)!r} does not exist")
    notes = []
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        df = _read_xlsx_first_sheet(path)
        fmt = "xlsx"
    else:
        line = _first_line(path)
        if ";" in line:
            # UCI AirQuality CSV: ';' separated, decimal commas, trailing empty fields/rows
            df = pd.read_csv(path, sep=";", decimal=",")
            fmt = "uci-semicolon"
        elif re.search(r"[A-Za-z]", line):
            df = pd.read_csv(path)
            fmt = "csv-header"
        else:
            df = pd.read_csv(path, header=None)
            df.columns = [f"x{j}" for j in range(df.shape[1] - 1)] + ["y"] if df.shape[1] > 1 \
                else ["y"]
            fmt = "csv-noheader"
    df.columns = [str(c).strip() for c in df.columns]
    # empty trailing fields / all-comma rows (AirQuality in every format)
    df = df.replace(r"^\s*$", np.nan, regex=True) if df.dtypes.eq(object).any() else df
    df = df.dropna(axis=1, how="all").dropna(axis=0, how="all")
    if fmt == "csv-noheader":
        df.columns = [f"x{j}" for j in range(df.shape[1] - 1)] + ["y"]
    dropped = [c for c in df.columns if c.lower() in _DROP_COLUMNS or c.lower().startswith("unnamed")]
    for c in df.columns:
        if c not in dropped and not pd.api.types.is_numeric_dtype(df[c]):
            conv = pd.to_numeric(df[c], errors="coerce")
            if conv.notna().sum() < 0.5 * df[c].notna().sum():
                dropped.append(c)
            else:
                df[c] = conv
    if dropped:
        notes.append(f"dropped non-feature columns {dropped}")
        df = df.drop(columns=dropped)
    if df.shape[1] < 2:
        raise BayesdpInputError(f"data: {str(path)!r} needs at least one feature and a response")
    y = df.iloc[:, -1].astype(float)
    X = df.iloc[:, :-1].astype(float)
    return X, y, fmt, notes


def _looks_like_airquality(X, name):
    if name == "airquality":
        return True
    cols = {c.lower() for c in X.columns}
    return "co(gt)" in cols or "pt08.s1(co)" in cols


def load_dataset(data, *, preprocessing="paper", data_dir=None, seed=0, train_fraction=0.8,
                 round_airquality=None) -> Dataset:
    """Load and preprocess a data set given by name (see :func:`dataset_names`) or file path.

    ``preprocessing``: "paper" (whole-file scaling, first 80% rows train, no shuffle) or
    "sound" (shuffled split with ``seed``, scaling fitted on training rows only); see module
    docstring. ``round_airquality``: round AirQuality values read from UCI originals to 2
    decimals (default: True with "paper"). The returned ``bounds`` are data-dependent (not private).
    """
    if preprocessing not in _PREPROCESSINGS:
        raise BayesdpInputError(f"preprocessing must be one of {_PREPROCESSINGS}, "
                                f"got {preprocessing!r}")
    if not 0 < float(train_fraction) < 1:
        raise BayesdpInputError(f"train_fraction must lie in (0, 1), got {train_fraction!r}")
    canon = canonical_name(data) if not Path(str(data)).suffix else None
    path = find_dataset_file(canon, data_dir) if canon else Path(data)
    name = canon or canonical_name(path.stem) or path.stem
    X, y, fmt, notes = read_regression_file(path)
    notes = list(notes)
    is_air = _looks_like_airquality(X, name)
    if is_air and fmt != "csv-noheader":
        if round_airquality is None:
            round_airquality = preprocessing == "paper"
        if round_airquality:
            X, y = X.round(2), y.round(2)
            notes.append("AirQuality values rounded to 2 decimals like the authors' CSV")
    feature_names = tuple(str(c) for c in X.columns)
    Xa = X.to_numpy(dtype=float)
    ya = y.to_numpy(dtype=float)
    N = Xa.shape[0]
    if preprocessing == "paper":
        if is_air:
            notes.append("AirQuality: the -200 missing-value code is kept as a number (paper)")
        Xa = np.nan_to_num(Xa, nan=0.0)
        ya = np.nan_to_num(ya, nan=0.0)
        n_tr = math.ceil(train_fraction * N)
        mu, sd = Xa.mean(axis=0), Xa.std(axis=0, ddof=1)
        sd = np.where(sd > 0, sd, 1.0)
        Xs = (Xa - mu) / sd
        yc = ya - ya.mean()
        ys = yc / np.abs(yc).max()
        Xtr, ytr, Xte, yte = Xs[:n_tr], ys[:n_tr], Xs[n_tr:], ys[n_tr:]
    else:
        if is_air:
            miss = (Xa == _MISSING_CODE) | np.isnan(Xa)
            keep = miss.mean(axis=0) <= 0.5
            if not keep.all():
                notes.append(f"AirQuality: dropped mostly-missing columns "
                             f"{[f for f, k in zip(feature_names, keep) if not k]}")
            Xa, feature_names = Xa[:, keep], tuple(f for f, k in zip(feature_names, keep) if k)
            bad = (((Xa == _MISSING_CODE) | np.isnan(Xa)).any(axis=1)
                   | (ya == _MISSING_CODE) | np.isnan(ya))
            notes.append(f"AirQuality: -200 treated as missing; dropped {int(bad.sum())} rows")
            Xa, ya = Xa[~bad], ya[~bad]
        else:
            bad = np.isnan(Xa).any(axis=1) | np.isnan(ya)
            if bad.any():
                notes.append(f"dropped {int(bad.sum())} rows with missing values")
            Xa, ya = Xa[~bad], ya[~bad]
        N = Xa.shape[0]
        perm = np.random.default_rng(seed).permutation(N)
        Xa, ya = Xa[perm], ya[perm]
        n_tr = math.ceil(train_fraction * N)
        mu, sd = Xa[:n_tr].mean(axis=0), Xa[:n_tr].std(axis=0, ddof=1)
        sd = np.where(sd > 0, sd, 1.0)
        Xs = (Xa - mu) / sd
        ymu = ya[:n_tr].mean()
        scale = np.abs(ya[:n_tr] - ymu).max()
        ys = (ya - ymu) / (scale if scale > 0 else 1.0)
        Xtr, ytr, Xte, yte = Xs[:n_tr], ys[:n_tr], Xs[n_tr:], ys[n_tr:]
    if Xtr.shape[0] < 2 or Xte.shape[0] < 1:
        raise BayesdpInputError(f"data: {str(path)!r} has too few rows ({N}) for a train/test split")
    if name == "bikesharing" or {"casual", "registered"} <= set(feature_names):
        notes.append("BikeSharing: y = cnt = casual + registered, both features; the "
                     "non-private fit is exact")
    theta_ols = np.linalg.lstsq(Xtr, ytr, rcond=None)[0]
    bx = float(np.sqrt(np.einsum("ij,ij->i", Xtr, Xtr)).max())
    by = float(np.abs(ytr).max())
    notes.append(_DATA_BOUNDS_NOTE)
    return Dataset(name=name, X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte,
                   feature_names=feature_names, theta_ols=theta_ols, bounds=(bx, by),
                   preprocessing=preprocessing, source=str(path), file_format=fmt,
                   bounds_from_data=True, notes=tuple(notes))
