"""No single request takes the service down: the cases of the fault run, one by one.

Each is answered with a 4xx within a second (naming the field) or handled correctly, and the
service answers /readyz afterwards. A dedicated server runs with tiny streaming chunks and
limits, so that streamed answers (many chunks) and the limits are reached by small requests.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time

import httpx
import numpy as np
import orjson
import pytest

from featurehash import create_map
from featurehash.client import FeatureHashAPIError, FeatureHashClient
from service_support import JSON, NPY, ServiceProcess, children, cmdline, load_npy, npy_bytes, wait_until

CHUNK_BYTES = 4096
RFF = {"method": "rff", "input_dim": 6, "n_components": 64, "seed": 7, "params": {"gamma": 0.5}}
GCWS = {"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 8, "params": {"bits": 3}}
BINNING = {"method": "binning", "input_dim": 6, "n_components": 16, "seed": 9}
X = np.random.default_rng(11).uniform(0.1, 2.0, size=(300, 6))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServiceProcess("robust", tmp_path_factory.mktemp("serve-robust"), stream_chunk_bytes=CHUNK_BYTES,
                             max_kernel_entries=10_000, max_output_elements=200_000, max_map_bytes=2**26)
    process.start().wait_ready()
    yield process
    assert not process.terminate()


@pytest.fixture(scope="module")
def maps(server):
    with server.client() as http:
        return {name: http.post("/v1/maps", json=spec).json()["id"]
                for name, spec in (("rff", RFF), ("gcws", GCWS), ("binning", BINNING))}


def _timed(http: httpx.Client, method: str, path: str, **kwargs) -> httpx.Response:
    start = time.monotonic()
    response = http.request(method, path, **kwargs)
    assert time.monotonic() - start < 1.0, f"{method} {path} took {time.monotonic() - start:.2f} s"
    return response


def _refused(response: httpx.Response, field: str, status: int = 422) -> None:
    assert response.status_code == status, response.text
    assert response.json()["field"] == field, response.text


# -- sizing before work ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, field", [
    ({"method": "quadrature", "input_dim": 1_000_000_000, "n_components": 8}, "input_dim"),
    ({"method": "quadrature", "input_dim": 1_000_000_000, "n_components": 8,
      "params": {"anova": {"window": 999_990_000}}}, "input_dim"),
    ({"method": "rff", "input_dim": 784, "n_components": 684_784}, "n_components"),
    ({"method": "random_maclaurin", "input_dim": 4096, "n_components": 131_072}, "n_components"),
    ({"method": "nrff", "input_dim": 2**20, "n_components": 2**10}, "input_dim"),
])
def test_oversized_maps_are_refused_at_once(server, spec, field):
    with server.client() as http:
        _refused(_timed(http, "POST", "/v1/maps", json=spec), field)
        assert http.get("/readyz").status_code == 200


@pytest.mark.parametrize("value", ["4", 4.0, True])
def test_spec_integers_are_strict(server, value):
    with server.client() as http:
        _refused(http.post("/v1/maps", json={**RFF, "input_dim": value}), "input_dim")
        _refused(http.post("/v1/maps", json={**GCWS, "params": {"bits": value}}), "params.bits")


def test_srf_scales_that_overflow_are_refused(server):
    """Both spectra a stored spec may carry: shells (radii) and the older mixture (scales)."""
    with server.client() as http:
        spec = http.post("/v1/maps", json={"method": "srf", "input_dim": 4, "n_components": 8}).json()
        spec["params"]["radii"] = [1e308] * len(spec["params"]["radii"])
        _refused(_timed(http, "POST", "/v1/maps", json=spec), "params.radii.0")
        mixture = {"method": "srf", "input_dim": 4, "n_components": 8,
                   "params": {"weights": [1.0], "scales": [1e308], "mass": 1.0}}
        _refused(_timed(http, "POST", "/v1/maps", json=mixture), "params.scales.0")
        _refused(_timed(http, "POST", "/v1/maps", json={**RFF, "params": {"gamma": 1e308}}), "params.gamma")


# -- bodies that used to give 500 ----------------------------------------------------------------------

@pytest.mark.parametrize("route", ["transform", "hash", "kernel"])
def test_deeply_nested_json_is_a_422(server, maps, route):
    body = b'{"vectors": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    with server.client() as http:
        _refused(_timed(http, "POST", f"/v1/maps/{maps['gcws']}/{route}", content=body,
                        headers={"Content-Type": JSON}), "body")


@pytest.mark.parametrize("name", ["gcws", "binning"])
@pytest.mark.parametrize("dtype", [">f8", ">f4"])
def test_big_endian_npy_is_read_as_its_numbers(server, maps, name, dtype):
    expected = create_map({"gcws": GCWS, "binning": BINNING}[name]).hash(X[:5])
    with server.client() as http:
        response = http.post(f"/v1/maps/{maps[name]}/hash", content=npy_bytes(X[:5].astype(dtype)),
                             headers={"Content-Type": NPY, "Accept": NPY})
        assert response.status_code == 200, response.text
        np.testing.assert_array_equal(load_npy(response.content), expected)


@pytest.mark.parametrize("rows, dtype, query", [
    ([[1e308, -1e308, 1e308, 1e308, 1.0, 1.0]], np.float64, "float64"),
    ([[1.0] * 6, [3.4e38] * 6], np.float32, "float32"),
])
def test_non_finite_features_are_a_422_naming_the_row(server, maps, rows, dtype, query):
    with server.client() as http:
        response = http.post(f"/v1/maps/{maps['rff']}/transform", params={"dtype": query},
                             content=npy_bytes(np.array(rows, dtype=dtype)), headers={"Content-Type": NPY})
        _refused(response, "vectors")
        assert f"row {len(rows) - 1}" in response.json()["detail"]


def test_kernel_beyond_its_limits_is_a_422(server, maps):
    with server.client() as http:
        _refused(_timed(http, "POST", f"/v1/maps/{maps['rff']}/kernel", json={"x": X[:101].tolist()}), "x")
        _refused(_timed(http, "POST", f"/v1/maps/{maps['rff']}/kernel",
                        json={"x": X[:10].tolist(), "y": np.tile(X, (4, 1)).tolist()}), "y")
        ok = http.post(f"/v1/maps/{maps['rff']}/kernel", json={"x": X[:50].tolist()})
        assert ok.status_code == 200 and np.asarray(ok.json()["exact"]).shape == (50, 50)


def test_outputs_beyond_the_limit_are_a_422(server, maps):
    with server.client() as http:
        big = np.ones((200_000 // 64 + 1, 6))
        _refused(http.post(f"/v1/maps/{maps['rff']}/transform", content=npy_bytes(big),
                           headers={"Content-Type": NPY}), "vectors")


# -- streamed answers: the same bytes as built whole --------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_streamed_dense_features_are_byte_identical(server, maps, dtype):
    features = create_map(RFF).transform(X, dtype=np.dtype(dtype))
    assert features.nbytes > 10 * CHUNK_BYTES
    expected_npy = io.BytesIO()
    np.save(expected_npy, features, allow_pickle=False)
    with server.client() as http:
        as_npy = http.post(f"/v1/maps/{maps['rff']}/transform", params={"dtype": dtype}, content=npy_bytes(X),
                           headers={"Content-Type": NPY, "Accept": NPY})
        as_json = http.post(f"/v1/maps/{maps['rff']}/transform", params={"dtype": dtype}, json={"vectors": X.tolist()})
    assert as_npy.headers.get("content-length") == str(len(expected_npy.getvalue()))  # streamed, size known
    assert as_npy.content == expected_npy.getvalue()
    assert as_json.content == orjson.dumps({"features": features}, option=orjson.OPT_SERIALIZE_NUMPY)


def _peak_rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_streamed_answers_hold_a_few_chunks_not_the_answer(tmp_path):
    """A 256 MiB .npy answer (128 chunks of 2 MiB) raises the worker's peak RSS by far less than itself."""
    process = ServiceProcess("bounded", tmp_path).start().wait_ready()
    try:
        web = next(pid for pid in children(process.pid) if "featurehash.service.web" in cmdline(pid))
        spec = {"method": "rff", "input_dim": 8, "n_components": 4096, "seed": 3, "params": {"gamma": 0.1}}
        rows = np.random.default_rng(3).standard_normal((16384, 8)).astype(np.float32)
        with process.client(timeout=120.0) as http:
            map_id = http.post("/v1/maps", json=spec).json()["id"]
            path, body = f"/v1/maps/{map_id}/transform", npy_bytes(rows)
            headers = {"Content-Type": NPY, "Accept": NPY}
            assert http.post(path, content=npy_bytes(rows[:2048]), headers=headers).status_code == 200  # 32 MiB
            before = _peak_rss_bytes(web)
            with http.stream("POST", path, content=body, headers=headers) as response:
                assert response.status_code == 200
                answer_bytes = int(response.headers["content-length"])
                parts = response.iter_bytes(chunk_size=65536)
                head = next(parts)
                received = len(head) + sum(len(part) for part in parts)
        growth = _peak_rss_bytes(web) - before
        assert answer_bytes == received > 256 * 2**20
        expected = create_map(spec).transform(rows[:1])
        np.testing.assert_allclose(np.frombuffer(head[128:128 + expected.nbytes], np.float32), expected[0],
                                   rtol=1e-5, atol=1e-6)
        assert growth < 64 * 2**20, f"peak RSS grew by {growth / 2**20:.0f} MiB for a 256 MiB answer"
    finally:
        process.cleanup()


def test_streamed_codes_and_band_keys_are_byte_identical(server, maps):
    from featurehash.lsh.banding import band_keys

    gcws = create_map(GCWS)
    codes, one_hot = gcws.hash(X), gcws.transform(X)
    with server.client() as http:
        hashed = http.post(f"/v1/maps/{maps['gcws']}/hash", json={"vectors": X.tolist(), "bands": 4})
        features = http.post(f"/v1/maps/{maps['gcws']}/transform", json={"vectors": X.tolist()})
        indices = http.post(f"/v1/maps/{maps['gcws']}/transform", content=npy_bytes(X),
                            headers={"Content-Type": NPY, "Accept": NPY})
    assert hashed.content == orjson.dumps({"codes": codes, "band_keys": band_keys(codes, 4).tolist()},
                                          option=orjson.OPT_SERIALIZE_NUMPY)
    assert features.content == orjson.dumps({"dim": one_hot.dim, "scale": one_hot.scale, "indices": one_hot.indices},
                                            option=orjson.OPT_SERIALIZE_NUMPY)
    np.testing.assert_array_equal(load_npy(indices.content), one_hot.indices)
    assert indices.headers["X-Feature-Dim"] == str(one_hot.dim)


# -- item ids ----------------------------------------------------------------------------------------------

def test_item_ids_address_only_their_item(server, maps):
    with server.client() as http:
        assert http.post("/v1/indexes", json={"map_id": maps["gcws"], "name": "victim", "bands": 4,
                                              "rows": 2}).status_code in (200, 201)
        for bad in (".", "..", "a/b", "a\\b", "tab\there"):
            _refused(http.post("/v1/indexes/victim/items", json={"ids": [bad], "vectors": X[:1].tolist()}), "ids[0]")
        assert http.post("/v1/indexes/victim/items", json={"ids": ["x", "y", "..."],
                                                           "vectors": X[:3].tolist()}).status_code == 200
        for raw in ("%2E%2E", "%2e"):  # httpx itself removes a literal "." or ".." segment
            _refused(http.delete(f"/v1/indexes/victim/items/{raw}"), "item_id")
        with FeatureHashClient(server.url) as client:
            with pytest.raises(FeatureHashAPIError) as refused:  # before sending, as the service refuses %2E%2E
                client.delete_item("victim", "..")
            assert (refused.value.status, refused.value.field) == (422, "item_id")
            client.delete_item("victim", "...")
            assert client.delete_items("victim", ["x", "nope"]) == {"removed": 1, "missing": ["nope"]}
            assert client.get_index("victim")["items"] == 1


# -- the embedded Redis comes back ---------------------------------------------------------------------------

def _redis_pid(server: ServiceProcess) -> int:
    out = subprocess.run(["pgrep", "-f", f"redis-server.*{server.data_dir}"], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def test_killed_redis_is_restarted_without_losing_writes(server, maps):
    with server.client(timeout=5.0) as http:
        written = [http.post("/v1/maps", json={**RFF, "seed": 1000 + i}).json()["id"] for i in range(20)]
        old = _redis_pid(server)
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        assert wait_until(lambda: _get_status(http, "/readyz") == 200, 10.0), server.log_tail()
        print(f"\nembedded Redis killed -> /readyz 200 in {time.monotonic() - killed:.3f} s")
        assert _redis_pid(server) != old
        assert all(http.get(f"/v1/maps/{map_id}").status_code == 200 for map_id in written)
        assert not os.path.exists(f"/proc/{old}") or "Z" not in open(f"/proc/{old}/stat").read().split()[2]


def _get_status(http: httpx.Client, path: str) -> int | None:
    try:
        return http.get(path).status_code
    except httpx.HTTPError:
        return None


def test_redis_that_cannot_come_back_makes_the_launcher_exit_non_zero(tmp_path):
    process = ServiceProcess("doomed", tmp_path).start().wait_ready()
    try:
        with process.client() as http:
            assert http.post("/v1/maps", json=RFF).status_code == 201
        (tmp_path / "appendonly.aof").write_bytes(b"*9\r\ngarbage that no Redis can replay\r\n")
        os.kill(_redis_pid(process), signal.SIGKILL)
        assert wait_until(lambda: not process.running(), 20.0), process.log_tail()
        assert process.proc.returncode == 4, process.log_tail()
    finally:
        process.cleanup()
