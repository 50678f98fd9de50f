"""The proposal ranker of the symmetric population search: its records, its model file and the guided search from
the command line (`szrank search --strategy symmetric --model`)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers import run, tool
from szrank.geometry.symmetry import symmetry_of
from szrank.plumbing.errors import OptionError
from szrank.ranker.proposals import (PROPOSAL_FEATURES, RECORD_DTYPE, load_ranker, read_records, train_ranker,
                                     write_records)
from szrank.search.archive import list_runs, read_run
from szrank.search.guided import log_run as logged
from szrank.search.population import CANDIDATES, population_search

BEST_LINE = r"best C\+I (\d+) after (\d+) evaluations"


@pytest.fixture(scope="module")
def ranker_file(tmp_path_factory):
    "A ranker trained on a short run's records of topology 46 (C3), saved as SZTPR001."
    records, _ = logged(46, 12_000, seed=2)
    path = tmp_path_factory.mktemp("ranker") / "ranker.sztpr"
    train_ranker(records, hidden=8, epochs=2).save(path)
    return path


def test_logging_leaves_the_run_unchanged_and_records_every_counted_proposal(tmp_path):
    records, result = logged(42, 4_000, seed=3)
    plain = population_search(42, 4_000, seed=3, symmetry=symmetry_of(42))
    assert result.history == plain.history and result.evaluations == plain.evaluations
    assert len(records) == result.evaluations - 320 * (result.restarts + 1)
    assert np.isfinite(records["features"]).all() and records["features"].shape[1] == len(PROPOSAL_FEATURES)
    improving = records["gain"] > 0
    # gain is against the member the proposal perturbed (a far member jumps from a random one), so an improving
    # proposal is not always kept; most are
    assert 0 < improving.sum() < len(records) and records["accepted"][improving].mean() > 0.5
    path = write_records(tmp_path / "p.sztp", records)
    assert (read_records(path) == records).all()
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(OptionError, match="not an SZTPP001"):
        read_records(path)


def test_a_guided_run_spends_the_same_evaluations_and_is_deterministic(ranker_file):
    ranker = load_ranker(ranker_file)
    plain = population_search(53, 6_000, seed=9, symmetry=symmetry_of(53))
    guided = [population_search(53, 6_000, seed=9, symmetry=symmetry_of(53), ranker=ranker) for _ in range(2)]
    assert guided[0].history == guided[1].history and guided[0].evaluations == plain.evaluations
    assert guided[0].history != plain.history
    with pytest.raises(OptionError, match="candidates"):
        population_search(53, 6_000, seed=9, symmetry=symmetry_of(53), ranker=ranker, candidates=0)
    assert CANDIDATES > 1


def test_guided_symmetric_search_from_the_command_line(tmp_path, ranker_file):
    root = tmp_path / "archive"
    command = [tool("szrank"), "search", "--archive", str(root), "--topology", "42", "--evaluations", "3000",
               "--strategy", "symmetric", "--seed", "4", "--model", str(ranker_file)]
    result = run(command, timeout=300)
    assert result.returncode == 0, result.stderr
    best, at = map(int, re.fullmatch(BEST_LINE, result.stdout.strip().splitlines()[-1]).groups())
    (run_id,) = list_runs(root)
    metadata, _ = read_run(root, run_id)
    assert metadata["model"] == str(ranker_file) and metadata["best_total"] == best and metadata["symmetry"] == "S4"
    assert 3000 <= metadata["evaluations"] < 3000 + 32 and at <= metadata["evaluations"]


def test_a_wrong_model_file_is_one_line(tmp_path):
    bad = tmp_path / "model.sztpr"
    bad.write_bytes(b"SZTRNK01" + bytes(200))
    result = run([tool("szrank"), "search", "--archive", str(tmp_path / "a"), "--topology", "42", "--evaluations",
                  "640", "--strategy", "symmetric", "--model", str(bad)], timeout=120)
    assert result.returncode == 2 and "not an SZTPR001" in result.stderr and len(result.stderr.strip().splitlines()) == 1
