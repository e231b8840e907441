"""The request work budget (FEATUREHASH_REQUEST_WORK_SECONDS) and POST /v1/maps answering a spec posted before
from its alias, on real `featurehash serve` processes."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from featurehash.maps import requested_spec
from featurehash.maps.cost import rows_within
from service_support import NPY, ServiceProcess, npy_bytes, start_all

# Seconds of CPU: above the SSF map's predicted creation (~1.1 s), below a few thousand tensorsketch rows.
BUDGET = 1.5
SSF = {"method": "ssf", "input_dim": 1024, "n_components": 16384}


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """A server with a small budget, and its data directory (restarted by the alias test)."""
    holder = {"dir": tmp_path_factory.mktemp("serve-cost")}
    holder["server"] = start_all([ServiceProcess("cost", holder["dir"], request_work_seconds=BUDGET)])[0]
    yield holder
    assert not holder["server"].terminate()


TENSORSKETCH_64 = {"method": "tensorsketch", "input_dim": 64, "n_components": 2**22, "params": {"degree": 64}}
STRUCTURED_RFF = {"method": "rff", "input_dim": 8, "n_components": 2**22, "params": {"frequencies": "structured"}}


def _timed(call):
    start = time.perf_counter()
    response = call()
    return response, time.perf_counter() - start


def test_the_default_budget_refuses_the_reported_requests_at_once(embedded_server):
    """The issue's cases: structured rff at 2^22 components (~37 s predicted, 17 s of CPU measured here, 58-80 s
    reported on a busy host) and 4 rows of tensorsketch degree 64 at 2^22 (~12 s predicted a row)."""
    with embedded_server.client() as http:
        refused, elapsed = _timed(lambda: http.post("/v1/maps", json=STRUCTURED_RFF))
        assert refused.status_code == 422 and refused.json()["field"] == "n_components", refused.text
        assert "s of CPU" in refused.json()["detail"] and elapsed < 1.0
        created = http.post("/v1/maps", json=TENSORSKETCH_64)
        assert created.status_code in (200, 201), created.text
        X = np.random.default_rng(0).random((4, 64)).astype(np.float32) / 64
        try:
            batch, elapsed = _timed(lambda: http.post(f"/v1/maps/{created.json()['id']}/transform",
                                                      content=npy_bytes(X), headers={"Content-Type": NPY}))
            assert batch.status_code == 422 and batch.json()["field"] == "vectors", batch.text
            assert "send at most 2 rows" in batch.json()["detail"] and elapsed < 1.0
        finally:
            http.delete(f"/v1/maps/{created.json()['id']}")


@pytest.mark.parametrize("spec, field", [(TENSORSKETCH_64, "params.degree"), (STRUCTURED_RFF, "n_components")])
def test_a_spec_over_a_budget_is_refused_naming_its_field(tight, spec, field):
    with tight["server"].client() as http:
        response, elapsed = _timed(lambda: http.post("/v1/maps", json=spec))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field and "s of CPU" in response.json()["detail"]
    assert elapsed < 1.0


def test_a_batch_over_the_budget_is_refused_naming_vectors(tight):
    spec = {"method": "tensorsketch", "input_dim": 64, "n_components": 4096, "seed": 4, "params": {"degree": 8}}
    most = rows_within(requested_spec(spec), BUDGET, 64)
    assert 100 < most < 5000
    X = np.random.default_rng(0).random((most + 1, 64)).astype(np.float32) / 8
    with tight["server"].client() as http:
        map_id = http.post("/v1/maps", json=spec).json()["id"]
        under = http.post(f"/v1/maps/{map_id}/transform", content=npy_bytes(X[:most]),
                          headers={"Content-Type": NPY, "Accept": NPY})
        assert under.status_code == 200, under.text
        over = http.post(f"/v1/maps/{map_id}/transform", content=npy_bytes(X),
                         headers={"Content-Type": NPY, "Accept": NPY})
        assert over.status_code == 422
        assert over.json()["field"] == "vectors" and f"send at most {most} rows" in over.json()["detail"]
        kernel = http.post(f"/v1/maps/{map_id}/kernel", content=npy_bytes(X[:most]), headers={"Content-Type": NPY})
        assert kernel.status_code == 422 and kernel.json()["field"] == "x"   # estimate and exact: twice the work
        gcws = {"method": "gcws", "input_dim": 64, "n_components": 4096}
        assert rows_within(requested_spec(gcws), BUDGET, 64) < X.shape[0]
        gcws_id = http.post("/v1/maps", json=gcws).json()["id"]
        refused = http.post(f"/v1/maps/{gcws_id}/hash", content=npy_bytes(X + 0.01), headers={"Content-Type": NPY})
        assert refused.status_code == 422 and refused.json()["field"] == "vectors"


def _restart(tight, budget: float) -> None:
    server = tight["server"]
    assert not server.terminate()
    tight["server"] = start_all([ServiceProcess("cost-again", tight["dir"], port=server.port,
                                                request_work_seconds=budget)])[0]


def test_a_spec_posted_again_is_not_fitted_again_even_after_a_restart(tight):
    """Proved without timing: after a restart with a budget too small for the fit, the spec posted again, and
    its resolved form posted back, are still answered (a fit would be refused); once the map is deleted the
    same post is refused by the budget, so it is the alias that answered."""
    # A fresh seed: the index-set search is cached per process by (m, n, seed).
    spec = {**SSF, "seed": uuid.uuid4().int % 2**40}
    with tight["server"].client() as http:
        first = http.post("/v1/maps", json=spec)
        assert first.status_code == 201, first.text
        again = http.post("/v1/maps", json=spec)
        assert again.status_code == 200 and again.json() == first.json()
        assert again.headers["Location"] == f"/v1/maps/{first.json()['id']}"
    _restart(tight, budget=0.001)
    try:
        with tight["server"].client() as http:
            again = http.post("/v1/maps", json=spec)
            assert again.status_code == 200 and again.json() == first.json()
            # The resolved spec posted back (its own request, its fitted numbers in it) is not fitted again.
            echoed = http.post("/v1/maps", json=first.json())
            assert echoed.status_code == 200 and echoed.json() == first.json()
            # A stale echoed id is still refused by name, not answered from the alias.
            stale = http.post("/v1/maps", json={**first.json(), "id": "ssf-v1-000000000000000000000000"})
            assert stale.status_code == 422 and stale.json()["field"] == "id"
            # Deleting the map deletes its alias: posting again would fit it anew, which this budget refuses.
            assert http.delete(f"/v1/maps/{first.json()['id']}").status_code == 204
            refused = http.post("/v1/maps", json=spec)
            assert refused.status_code == 422 and "s of CPU" in refused.json()["detail"], refused.text
    finally:
        _restart(tight, budget=BUDGET)
    with tight["server"].client() as http:
        remade = http.post("/v1/maps", json=spec)
        assert remade.status_code == 201 and remade.json()["id"] == first.json()["id"]


@pytest.mark.parametrize("multiplier", [1.0, 2.0])
def test_dense_rows_are_checked_as_the_cost_model_checks_them(multiplier):
    """check_work keeps a map's dense-row prices (maps.cost.row_seconds) after its first request: the rows that
    fit are the cost model's own, the first row over is refused with check_rows's message, every time."""
    from featurehash.maps import InputError, create_map
    from featurehash.maps.cost import check_rows
    from featurehash.service.api.state import ServiceState
    from featurehash.service.config import Settings

    budget = 0.01
    state = ServiceState(Settings(request_work_seconds=budget), None, None, None, None)
    spec = {"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1,
            "params": {"gamma": 1 / 64}}
    feature_map = create_map(spec)
    fit = rows_within(feature_map.spec, budget / multiplier, 64)
    assert fit > 1
    for _ in range(2):  # priced, then from what was kept
        state.check_work(feature_map, np.zeros((fit, 64)), multiplier=multiplier)
        with pytest.raises(InputError) as refused:
            state.check_work(feature_map, np.zeros((fit + 1, 64)), "x", multiplier=multiplier)
        with pytest.raises(InputError) as expected:
            check_rows(feature_map.spec, fit + 1, (fit + 1) * 64, budget, field="x", multiplier=multiplier)
        assert (refused.value.field, str(refused.value)) == ("x", str(expected.value))
    assert list(state._dense_prices) == [feature_map.spec.id]
