"""fit_sample given as a numpy array (featurehash.maps.inputs.SampleRows): the same requested and resolved
spec, id and canonical JSON as the same rows given as lists, whatever the array's dtype and values; checked
whole, with named errors; the caller's array copied."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from featurehash.maps import SpecError, create_map, requested_spec, resolve_spec

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_FILES = ("kernel_approximation.json", "matern.json", "quadrature.json", "quadrature_forward.json")
FIT_CASES = {f"{file}:{name}": case for file in GOLDEN_FILES
             for name, case in json.loads((GOLDEN / file).read_text())["cases"].items()
             if "fit_sample" in (case.get("request", {}).get("params") or {})}
# Values whose text a float writer could get wrong: signed zero, the subnormal range and its edges, the
# largest finite numbers, exact integers past 2^53, powers of ten where writers switch to exponents.
EDGE_VALUES = [0.0, -0.0, 5e-324, -5e-324, 2.225073858507201e-308, 2.2250738585072014e-308,
               1.7976931348623157e308, -1.7976931348623157e308, 2.0**53, 2.0**53 + 2, 2.0**63, 2.0**64,
               1e15, 1e16, 1e17, 1e21, 1e22, 1e23, 1e-5, 1e-7, 0.1, 1 / 3, 123456789012345680.0,
               float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny), float(np.float32(1e-45))]


def nystroem_request(rows, **params) -> dict:
    width = rows.shape[1] if isinstance(rows, np.ndarray) else len(rows[0])
    return {"method": "nystroem", "input_dim": width, "n_components": 4, "seed": 5,
            "params": {"gamma": 0.5, **params, "fit_sample": rows}}


def finite_bit_patterns(count: int, dtype, seed: int) -> np.ndarray:
    """Random bit patterns of `dtype` (every sign, exponent and mantissa), the non-finite ones dropped."""
    words = np.random.default_rng(seed).integers(0, 2**63, count, dtype=np.uint64)
    values = words.astype(np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    return values[np.isfinite(values)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_canonical_json_of_an_array_is_that_of_its_list(dtype):
    with np.errstate(over="ignore"):   # the float64 edges past float32's range become infinities, dropped
        edges = np.array(EDGE_VALUES).astype(dtype)
    values = np.concatenate([edges[np.isfinite(edges)], finite_bit_patterns(40_000, dtype, 1)])
    rows = values[: values.size // 8 * 8].reshape(-1, 8)
    from_list = requested_spec(nystroem_request(rows.tolist()))
    from_array = requested_spec(nystroem_request(rows))
    assert from_array.canonical_json() == from_list.canonical_json()
    assert from_array.id == from_list.id
    # and float32 rows are their float64 values (what pydantic makes of the float32 numbers in a list)
    assert from_array.id == requested_spec(nystroem_request(rows.astype(np.float64).tolist())).id
    signs = json.loads(from_array.canonical_json())["params"]["fit_sample"]
    assert any(str(value) == "-0.0" for row in signs for value in row)


@pytest.mark.parametrize("rows", [
    np.array([[0, 1, 2**62 + 1, 2**63 - 1], [-3, 2**53 + 1, -(2**63), 1]], dtype=np.int64),   # rounded past 2^53
    np.array([[0, 1, 2**63 + 2**11 + 1, 2**64 - 1], [3, 2**53 + 1, 7, 1]], dtype=np.uint64),
    np.array([[0, -1, 2**31 - 1, -(2**31)], [3, 5, 7, 1]], dtype=np.int32),
    np.array([[0, 1, 255, 128], [3, 5, 7, 1]], dtype=np.uint8),
    np.array([[True, False, True, True], [False, False, True, False]]),
    np.array([[0.1, -0.0, 65504.0, 6e-8], [1 / 3, 2.0**-14, -2.0**-24, 1.0]], dtype=np.float16),
], ids=lambda rows: rows.dtype.name)
def test_integer_boolean_and_half_rows_are_the_numbers_a_list_makes(rows):
    from_list = requested_spec(nystroem_request(rows.tolist()))
    from_array = requested_spec(nystroem_request(rows))
    assert from_array.canonical_json() == from_list.canonical_json()


@pytest.mark.parametrize("name", list(FIT_CASES))
def test_golden_requests_resolve_to_their_stored_spec_from_an_array(name):
    case = FIT_CASES[name]
    request = case["request"]
    rows = np.array(request["params"]["fit_sample"])
    array_request = {**request, "params": {**request["params"], "fit_sample": rows}}
    assert requested_spec(array_request).id == requested_spec(request).id
    resolved = resolve_spec(array_request)
    assert resolved.id == case["spec"]["id"]
    assert resolved.canonical_json() == resolve_spec(request).canonical_json()
    # a strided, Fortran-ordered or float32-typed view of the same numbers is the same request
    assert requested_spec({**request, "params": {**request["params"], "fit_sample": np.asfortranarray(rows)}}).id \
        == requested_spec(request).id


def test_a_fit_on_float32_rows_with_edge_values_is_the_fit_on_their_list():
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(60, 5)).astype(np.float32)
    rows[0, :3] = [-0.0, np.float32(1e-45), np.float32(-1e-40)]     # signed zero and float32 subnormals
    rows[1, 0] = np.float32(3e-39)
    request = {"method": "nystroem", "input_dim": 5, "n_components": 40, "seed": 1,
               "params": {"gamma": "median", "fit_sample": rows}}
    from_array = create_map(request)
    from_list = create_map({**request, "params": {"gamma": "median", "fit_sample": rows.tolist()}})
    assert from_array.spec.canonical_json() == from_list.spec.canonical_json()
    assert from_array.spec.id == from_list.spec.id
    landmarks = from_array.spec.params["landmarks"]
    assert any(str(value) in ("-0.0", "1.401298464324817e-45") for row in landmarks for value in row)
    X = rng.normal(size=(7, 5))
    assert np.array_equal(from_array.transform(X, dtype=np.float64), from_list.transform(X, dtype=np.float64))


def test_rff_and_quadrature_take_arrays():
    rows = np.random.default_rng(3).normal(size=(50, 3))
    for request in ({"method": "rff", "input_dim": 3, "n_components": 8, "params": {"gamma": "scale"}},
                    {"method": "quadrature", "input_dim": 3, "n_components": 8,
                     "params": {"grid": "reweighted", "gamma": 0.5}}):
        lists = {**request, "params": {**request["params"], "fit_sample": rows.tolist()}}
        array = {**request, "params": {**request["params"], "fit_sample": rows.astype(np.float32).astype(np.float64)}}
        lists32 = {**request, "params": {**request["params"], "fit_sample": rows.astype(np.float32).tolist()}}
        assert requested_spec({**request, "params": {**request["params"], "fit_sample": rows}}).id \
            == requested_spec(lists).id
        assert resolve_spec(array).id == resolve_spec(lists32).id


def test_the_callers_array_is_copied_and_the_spec_holds_a_read_only_one():
    rows = np.random.default_rng(4).normal(size=(20, 3))
    request = nystroem_request(rows)
    spec = requested_spec(request)
    held = spec.params["fit_sample"]
    rows[0, 0] = 99.0   # after the request: the spec (and its id, computed on demand) do not see it
    assert held is not rows and not held.flags.writeable and held[0, 0] != 99.0
    assert spec.id == requested_spec(nystroem_request(held.tolist())).id
    assert spec.to_dict()["params"]["fit_sample"] is held


@pytest.mark.parametrize("rows, field, words", [
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "params.fit_sample", "finite number (row 0, column 1"),
    (np.array([[1.0, 2.0], [np.inf, 1.0]]), "params.fit_sample", "finite number (row 1, column 0"),
    (np.zeros(4), "params.fit_sample", "2-D array"),
    (np.zeros((2, 2, 2)), "params.fit_sample", "2-D array"),
    (np.zeros((3, 5)), "params.fit_sample", "input_dim = 2"),
    (np.zeros((0, 2)), "params.fit_sample", "input_dim = 2"),
    (np.array([["a", "b"]]), "params.fit_sample.0.0", "valid number"),
    (np.array([[1 + 2j, 0]]), "params.fit_sample", "real numbers"),
])
def test_bad_arrays_name_the_field(rows, field, words):
    with pytest.raises(SpecError) as caught:
        create_map({"method": "nystroem", "input_dim": 2, "n_components": 2, "params": {"fit_sample": rows}})
    assert caught.value.field == field and words in caught.value.message


def test_quadrature_counts_an_arrays_rows_as_a_lists():
    request = {"method": "quadrature", "input_dim": 2, "n_components": 8, "params": {"grid": "reweighted"}}
    for rows in (np.ones((1, 2)), [[1.0, 1.0]]):
        with pytest.raises(SpecError) as caught:
            resolve_spec({**request, "params": {**request["params"], "fit_sample": rows}})
        assert caught.value.field == "params.fit_sample" and "2" in caught.value.message
