"""Shared fixtures."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def generator() -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(20181203)
    return gen


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the project root; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data folder {SHARED_DATA} not present")
    return SHARED_DATA


AS_IF_CUDA_DIR = Path(__file__).resolve().parent / "as_if_cuda"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--as-if-cuda",
        action="store_true",
        help="run as on a machine with CUDA: torch.cuda.is_available() is True in this process and in the "
        "subprocesses tests start (tests/as_if_cuda/sitecustomize.py); nothing actually runs on a GPU",
    )


BUDGET_DIR_ENV = "PATE_STAB_BUDGET_DIR"  # pate_stab.privacy.ledger.data_budget.BUDGET_DIR_ENV


def _budget_folder(path: str | Path) -> str:
    """A data holder's budget folder for tests, whose cap for new data sets is large: tests run several folders
    on one data set (transfer, then compare; a rerun under another name), and every spend is still counted
    there. The data set's cap itself (a new data set takes its first run's) is tested in
    tests/privacy/ledger/test_data_budget.py and tests/run/test_data_set_budget.py, which remove this default."""
    from pate_stab.privacy.ledger.data_budget import set_default_cap

    set_default_cap(1e6, 0.5, folder=path)
    return str(path)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--as-if-cuda") or os.environ.get("PATE_STAB_AS_IF_CUDA") == "1":
        os.environ["PATE_STAB_AS_IF_CUDA"] = "1"
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(AS_IF_CUDA_DIR), os.environ.get("PYTHONPATH")]))
        spec = importlib.util.spec_from_file_location("_as_if_cuda", AS_IF_CUDA_DIR / "sitecustomize.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # applies the replacement in this process
        assert torch.cuda.is_available()

    # under pytest-xdist each worker process takes its share of the cores: torch's intra-op threads of several
    # workers would otherwise contend for the same cores (the subprocesses a test starts inherit the share)
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        threads = max(1, len(os.sched_getaffinity(0)) // int(workers))
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)

    # every run also counts its spends in the data holder's budget folder (default under the home
    # folder): tests never write there. A test gets its own folder (budget_dir); a fixture of a wider
    # scope its own too (pytest_fixture_setup); anything else this session's
    os.environ[BUDGET_DIR_ENV] = _budget_folder(tempfile.mkdtemp(prefix="pate_stab_budget_session_"))


def real_cuda() -> bool:
    """A GPU that code can use (not the ``--as-if-cuda`` stand-in)."""
    return os.environ.get("PATE_STAB_AS_IF_CUDA") != "1" and torch.cuda.is_available()


# The test files that take longest (CI's --durations, 2026-11): they are handed to the workers first, so that
# under pytest-xdist (a file to a worker) no long file starts last while the other worker idles. Order only:
# what runs, and each file's own order, are unchanged.
LONG_FILES = (
    "tests/run/test_own_data_run.py",
    "tests/run/test_direct.py",
    "tests/run/test_transfer.py",
    "tests/run/test_compare.py",
    "tests/run/test_student_select.py",
    "tests/run/test_label_privacy.py",
    "tests/run/test_neighbour_outputs.py",
    "tests/run/test_direct_cnn.py",
    "tests/test_cli.py",
    "tests/run/test_release_votes.py",
    "tests/run/test_combined_features.py",
)


def _long_first(item: pytest.Item) -> int:
    path = Path(item.path)
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else ""
    return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_long_first)  # stable: every file keeps its order
    if real_cuda():
        return
    skip = pytest.mark.skip(reason="needs a GPU (CUDA)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def budget_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data holder's budget folder of this test (pate_stab.privacy.ledger.data_budget), never the home folder's."""
    path = tmp_path_factory.mktemp("budget")
    monkeypatch.setenv(BUDGET_DIR_ENV, _budget_folder(path))
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> Iterator[None]:
    """A module-, class- or session-scoped fixture sets up with a budget folder of its own: the runs it makes
    are its own data holder's, as a test's are (fixtures on the same data in other folders would otherwise
    share one data set's cap)."""
    if fixturedef.scope == "function":
        yield
        return
    before = os.environ.get(BUDGET_DIR_ENV)
    os.environ[BUDGET_DIR_ENV] = _budget_folder(tempfile.mkdtemp(prefix=f"pate_stab_budget_{fixturedef.argname}_"))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(BUDGET_DIR_ENV, None)
        else:
            os.environ[BUDGET_DIR_ENV] = before
