"""Every Python example of docs/ runs as printed (issue 54, item 8): each ```python block of a
page, in order, in one namespace, in a fresh folder, as a reader would paste them. Pages whose
examples take minutes (a whole comparison, NUTS runs) run with the slow tests; pages that need
the UCI data sets get them through $BAYESDP_DATA_DIR, and those that need them or the shared
network edge lists skip cleanly without them."""

import contextlib
import io
import re
import textwrap
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UCI = ROOT.parent / "shared" / "data" / "uci"
NETWORKS = ROOT.parent / "shared" / "data" / "networks"
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
               if "```python" in p.read_text())
SLOW = {"docs/compare.md", "docs/methods.md", "docs/planning.md"}
NEEDS_UCI = {"docs/compare.md"}
NEEDS_NETWORKS = {"docs/adapters/consensus.md"}  # the US power grid's edge list (not shipped)


def blocks(page):
    text = (ROOT / page).read_text()
    return [textwrap.dedent(b) for b in re.findall(r"^[ ]*```python\n(.*?)^[ ]*```", text,
                                                     re.S | re.M)]


def test_every_page_with_examples_is_listed():
    assert "docs/tables.md" in PAGES and "docs/prediction.md" in PAGES and len(PAGES) >= 10


@pytest.mark.parametrize("page", [pytest.param(p, marks=[pytest.mark.slow] if p in SLOW else [])
                                  for p in PAGES])
def test_the_page_s_examples_run_as_printed(page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    if page in NEEDS_UCI:
        if not UCI.is_dir():
            pytest.skip(f"{page} reads the UCI data sets ({UCI} not found)")
        monkeypatch.setenv("BAYESDP_DATA_DIR", str(UCI))
    if page in NEEDS_NETWORKS and not NETWORKS.is_dir():
        pytest.skip(f"{page} reads a network edge list ({NETWORKS} not found)")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    code = blocks(page)
    assert code, page
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for k, block in enumerate(code):
            exec(compile(block, f"{page}, example {k + 1}", "exec"), namespace)
