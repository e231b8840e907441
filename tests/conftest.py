"""Shared fixtures. The HTTP service fixtures (real `featurehash serve` processes) live in
tests/service_support.py; they start nothing unless a test asks for them."""

import pytest
from service_support import embedded_server, main_maps, main_server, main_servers, service_client  # noqa: F401


@pytest.fixture
def single_threaded_blas():
    """Small products run ~2.5x faster on one BLAS thread when the 2 cores are shared (measured);
    the statistical test modules use it through `pytestmark`."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


# The modules that keep one worker longest (measured alone on 2 cores: Spark ~80 s, the fuzz ~60 s in six tests,
# Ray ~33 s, the portability variants ~25 s), run first and in this order: under -n 2 with --dist loadgroup and
# --no-loadscope-reorder (pyproject's addopts) xdist hands out work in collection order, so the two engine
# groups start at once on different workers and the short tests fill in behind them, instead of one long
# module starting last while the other worker has nothing left.
SLOW_FIRST = ("tests/adapters/test_spark.py", "tests/adapters/test_ray.py", "tests/service/test_service_fuzz.py",
              "tests/test_portability.py")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return SLOW_FIRST.index(module) if module in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)   # stable: every module keeps its own order
