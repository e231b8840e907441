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
