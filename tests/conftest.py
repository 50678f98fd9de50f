"""Shared pytest fixtures and the collection order; the helpers test modules import are in `helpers.py`."""
from pathlib import Path

import pytest

from helpers import ROOT


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="module")
def one_thread():
    "One intra-op torch thread for a module: on a shared 2-core machine more threads only contend (measured 8x slower)."
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: Test modules by the time they take, longest first: collected in this order, so that under
#: `-n 2 --dist loadscope --no-loadscope-reorder` the long modules start first and the short ones
#: fill in the end (the longest-first schedule).  Modules not named keep their order after these.
#: Measured serially (`pytest --durations=60`, a shared 2-core machine, so shares not seconds):
#: the site build 29% of the listed time, the demo's corpus stages 24%, the trainer's fault tests
#: 16%, the bench's corpus and checkpoint 11%, the load_learned run 7%, the corpus faults 6%.
LONGEST_FIRST = ("test_docs_site", "test_suvi_ingest", "test_widgets_browser", "test_suvi_faults_train",
                 "test_suvi_train", "test_szrank_demo", "test_suvi_bench", "test_suvi_faults_data",
                 "test_suvi_model_checkpoint", "test_szrank_search", "test_szrank_train", "test_szrank_faults_train",
                 "test_suvi_pool", "test_suvi_sun", "test_suvi_realism", "test_suvi_render", "test_szrank_corpus")


def pytest_collection_modifyitems(config, items):
    "Collect the longest modules first (see `LONGEST_FIRST`); the order of tests within a module is kept."
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))
