"""Issue 37: ``bayesdp simulate-network --help``, its protocols' help and the docs/adapters pages
name each protocol and its paper, not the source papers' internal names ("seed 000",
"seeds 001/003", "seed 004")."""

import re
from pathlib import Path

import pytest

from bayesdp.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "adapters"

# "seed 000", "Seed 004's", "seeds 001/003", "seed_004", "seed `000_...txt`"; not "--seed 0" or
# the report file names "seed-000-gossip.md"
INTERNAL = re.compile(r"\bseeds?[ _]?`?0\d\d", re.IGNORECASE)

# per protocol: its name and its paper (a title word group, the authors, the venue)
NAMES = {
    "gossip": ["SimpleGossip", "without Handshakes among Agents", "anonymous"],
    "pricer": ["PriCER", "Saha", "Seif", "Yemini", "Goldsmith", "Poor", "ISIT", "2023",
               "Collaborative Mean Estimation over Intermittently Connected Networks",
               "arXiv:2406.03766"],
    "consensus": ["linear consensus", "Papachristou", "Rahimian", "IISE Transactions",
                  "Differentially Private Distributed Estimation and Learning"],
}


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_pattern_catches_the_old_wording():
    for old in ["(seed 000)", "Seeds 001/003", "seed 004's consensus", "seed `000_485d.txt`",
                "seed_004"]:
        assert INTERNAL.search(old), old
    for fine in ["--seed 0", "seed-004-dp-distributed-estimation.md", "seed 2000 + s"]:
        assert not INTERNAL.search(fine), fine


def test_simulate_network_help_names_the_protocols_and_papers(capsys):
    text = _help(capsys, "simulate-network")
    assert not INTERNAL.search(text), INTERNAL.search(text)
    for protocol, names in NAMES.items():
        assert protocol in text
        for name in names:
            assert name in text, (protocol, name)


@pytest.mark.parametrize("protocol", sorted(NAMES))
def test_each_protocol_help_names_its_paper(capsys, protocol):
    text = _help(capsys, "simulate-network", protocol)
    assert not INTERNAL.search(text), INTERNAL.search(text)
    for name in NAMES[protocol][1:]:
        assert name in text, name


@pytest.mark.parametrize("protocol", sorted(NAMES))
def test_adapter_docs_name_the_protocol_and_its_paper(protocol):
    text = " ".join((DOCS / f"{protocol}.md").read_text(encoding="utf-8").split())
    assert not INTERNAL.search(text), INTERNAL.search(text)
    heading = text.split(" Module:")[0]
    assert NAMES[protocol][0] in heading, heading
    plain = text.replace("*", "")  # markdown emphasis around the titles
    for name in NAMES[protocol][1:]:
        assert name in plain, name


def test_adapter_docs_cite_papers_not_files_outside_the_repository():
    """The pages cite the papers; no reference file of a folder beside the repository
    (``../shared/reference/...``, the report names ``seed-000-gossip.md`` and the like)."""
    for f in DOCS.glob("*.md"):
        text = f.read_text(encoding="utf-8")
        for bad in ("shared/reference", "reference/seed-"):
            assert bad not in text, (f.name, bad)
        assert not re.search(r"seed-\d{3}", text), f.name


def test_no_internal_names_in_any_adapter_doc_or_module():
    import bayesdp.adapters as adapters

    files = list(DOCS.glob("*.md")) + list(Path(adapters.__file__).parent.glob("*.py"))
    assert len(files) >= 6
    for f in files:
        hit = INTERNAL.search(f.read_text(encoding="utf-8"))
        assert not hit, (f.name, hit)
