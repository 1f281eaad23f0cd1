"""Loaders: small fixtures in each original format, and the shared authors' CSVs when present."""

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import pytest

from bayesdp.paper.datasets import load_dataset, read_regression_file
from bayesdp.errors import BayesdpInputError

SHARED = Path(__file__).parents[2].parent / "shared" / "data" / "uci"


def _col(j):
    s = ""
    j += 1
    while j:
        j, r = divmod(j - 1, 26)
        s = chr(65 + r) + s
    return s


def write_xlsx(path, header, rows):
    """A minimal valid .xlsx (one sheet, inline-string header, numeric cells)."""
    cells = []
    cells.append('<row r="1">' + "".join(
        f'<c r="{_col(j)}1" t="inlineStr"><is><t>{escape(h)}</t></is></c>'
        for j, h in enumerate(header)) + "</row>")
    for i, row in enumerate(rows, start=2):
        cells.append(f'<row r="{i}">' + "".join(
            f'<c r="{_col(j)}{i}"><v>{v!r}</v></c>' for j, v in enumerate(row)) + "</row>")
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rns = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                   '<Default Extension="xml" ContentType="application/xml"/>'
                   '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
                   '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
                   '</Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>'
                   '</Relationships>')
        z.writestr("xl/workbook.xml", f'<?xml version="1.0"?><workbook {ns} {rns}><sheets>'
                   '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>')
        z.writestr("xl/_rels/workbook.xml.rels",
                   '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>'
                   '</Relationships>')
        z.writestr("xl/worksheets/sheet1.xml",
                   f'<?xml version="1.0"?><worksheet {ns}><sheetData>{"".join(cells)}</sheetData></worksheet>')


def _rows(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(10, 3, (n, 4)), 2)
    y = np.round(X @ [1.0, -0.5, 0.2, 0.1] + rng.normal(0, 0.1, n), 2)
    return X, y


def _check_paper_preproc(ds, X, y):
    n = len(y)
    ntr = int(np.ceil(0.8 * n))
    assert ds.n_train == ntr and ds.X_test.shape[0] == n - ntr
    Xs = (X - X.mean(0)) / X.std(0, ddof=1)
    assert np.allclose(ds.X_train, Xs[:ntr]) and np.allclose(ds.X_test, Xs[ntr:])
    yc = y - y.mean()
    assert np.allclose(np.concatenate([ds.y_train, ds.y_test]), yc / np.abs(yc).max())
    assert ds.bounds_from_data is True
    assert ds.bounds[1] == pytest.approx(np.abs(ds.y_train).max())


def test_ccpp_xlsx_and_csv(tmp_path):
    X, y = _rows()
    write_xlsx(tmp_path / "Folds5x2_pp.xlsx", ["AT", "V", "AP", "RH", "PE"],
               [list(map(float, r)) + [float(v)] for r, v in zip(X, y)])
    ds = load_dataset(tmp_path / "Folds5x2_pp.xlsx")
    assert ds.feature_names == ("AT", "V", "AP", "RH")
    _check_paper_preproc(ds, X, y)
    lines = ["AT,V,AP,RH,PE"] + [",".join(map(str, [*r, v])) for r, v in zip(X, y)]
    (tmp_path / "ccpp.csv").write_text("\n".join(lines) + "\n")
    _check_paper_preproc(load_dataset(tmp_path / "ccpp.csv"), X, y)
    # by name, from a data_dir holding only the UCI original
    assert load_dataset("powerplant", data_dir=tmp_path).file_format == "xlsx"


def test_bike_hour_csv(tmp_path):
    X, y = _rows(seed=1)
    lines = ["instant,dteday,season,yr,casual,registered,cnt"]
    for i, (r, v) in enumerate(zip(X, y)):
        lines.append(f"{i + 1},2011-01-0{1 + i % 9},{r[0]},{r[1]},{r[2]},{r[3]},{v}")
    (tmp_path / "hour.csv").write_text("\n".join(lines) + "\n")
    ds = load_dataset("bikesharing", data_dir=tmp_path)
    assert ds.feature_names == ("season", "yr", "casual", "registered")
    _check_paper_preproc(ds, X, y)
    assert any("casual + registered" in n for n in ds.notes)


def test_airquality_uci_semicolon(tmp_path):
    X, y = _rows(seed=2)
    X[3, 1] = -200.0
    lines = ["Date;Time;CO(GT);PT08.S1(CO);NMHC(GT);T;AH;;"]
    for r, v in zip(X, y):
        vals = ";".join(f"{a:.2f}".replace(".", ",") for a in [*r, v])
        lines.append(f"10/03/2004;18.00.00;{vals};;")
    lines += [";;;;;;;;"] * 3
    (tmp_path / "AirQualityUCI.csv").write_text("\r\n".join(lines) + "\r\n")
    ds = load_dataset("airquality", data_dir=tmp_path)
    assert ds.feature_names == ("CO(GT)", "PT08.S1(CO)", "NMHC(GT)", "T")
    assert ds.file_format == "uci-semicolon"
    _check_paper_preproc(ds, X, y)  # -200 kept as a number
    sound = load_dataset(tmp_path / "AirQualityUCI.csv", preprocessing="sound", seed=3)
    assert sound.n_train + sound.X_test.shape[0] == len(y) - 1  # the -200 row dropped
    assert np.allclose(sound.X_train.mean(0), 0, atol=1e-12)  # scaling fitted on training rows


def test_authors_csv_with_trailing_fields(tmp_path):
    X, y = _rows(seed=3)
    lines = [",".join(f"{a:.2f}" for a in [*r, v]) + ",," for r, v in zip(X, y)] + [",,,,,,"] * 4
    (tmp_path / "air_quality.csv").write_text("\r\n".join(lines) + "\r\n")
    ds = load_dataset("airquality", data_dir=tmp_path)
    assert ds.file_format == "csv-noheader" and ds.d == 4
    _check_paper_preproc(ds, X, y)


def test_3droad_txt(tmp_path):
    rng = np.random.default_rng(4)
    rows = np.column_stack([rng.integers(1e6, 1e8, 30), rng.normal(9.5, 0.1, 30),
                            rng.normal(57, 0.1, 30), rng.normal(20, 5, 30)])
    rows = np.round(rows, 6)
    (tmp_path / "3D_spatial_network.txt").write_text(
        "\n".join(",".join(f"{v:.6f}" for v in r) for r in rows) + "\n")
    ds = load_dataset("3droad", data_dir=tmp_path)
    assert ds.d == 3
    _check_paper_preproc(ds, rows[:, :3], rows[:, 3])


def test_bad_input(tmp_path):
    with pytest.raises(BayesdpInputError, match="data"):
        load_dataset("nosuchdata", data_dir=tmp_path)
    with pytest.raises(BayesdpInputError, match="found"):
        load_dataset("powerplant", data_dir=tmp_path)
    with pytest.raises(BayesdpInputError, match="preprocessing"):
        load_dataset("powerplant", data_dir=tmp_path, preprocessing="nope")
    with pytest.raises(BayesdpInputError, match="does not exist"):
        read_regression_file(tmp_path / "missing.csv")


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared UCI data not present")
@pytest.mark.parametrize("name,n_train,d,bx,ols_mse", [
    ("powerplant", 7655, 4, 4.1666, 0.012685),
    ("bikesharing", 13904, 14, 8.2982, 0.0),
    ("airquality", 7486, 12, 12.0552, 2.97e-5),
])
def test_shared_authors_files(name, n_train, d, bx, ols_mse):
    ds = load_dataset(name, data_dir=SHARED)
    assert (ds.n_train, ds.d) == (n_train, d)
    assert ds.bounds[0] == pytest.approx(bx, abs=1e-4)
    r = ds.y_test - ds.X_test @ ds.theta_ols
    assert np.mean(r * r) == pytest.approx(ols_mse, rel=1e-3, abs=1e-12)
