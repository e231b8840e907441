"""Golden vectors: a stored spec transforms identically forever (DESIGN.md "Spec and identity").

tests/golden/golden.json is written once by tests/golden/make_golden.py. Tolerances: float
features rtol 1e-5 / atol 1e-6 (libm's cos/sin/log and BLAS summation order may differ by an
ulp or so across platforms; float32 features are ~0.1-0.5 in size, so 1e-6 is a few float32 ulps),
discrete codes and ids exactly, raw seed-derived parameters rtol 1e-12 (they go through ndtri /
tan only, no accumulation).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from featurehash.maps import FORMAT_VERSION, create_map, resolve_spec
from featurehash.maps import randomness
from featurehash.maps.base import EMPTY_CODE
from feature_promises import assert_dense_features_match

GOLDEN = json.loads((Path(__file__).resolve().parent / "golden" / "golden.json").read_text())
CASES = GOLDEN["cases"]
RAW = {"rtol": 1e-12, "atol": 0}
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


def from_stored_spec(case):
    """Rebuild the map as a replica does: from the stored resolved spec, id included."""
    return create_map({key: case["spec"][key] for key in (*SPEC_FIELDS, "id")})


def test_golden_file_matches_format_version():
    assert GOLDEN["format_version"] == FORMAT_VERSION
    methods = {case["spec"]["method"] for case in CASES.values()}
    assert {"rff", "nrff", "gcws"} <= methods


@pytest.mark.parametrize("name", list(CASES))
def test_spec_resolves_to_the_stored_id(name):
    case = CASES[name]
    stored = case["spec"]
    m = create_map(case["request"])
    assert m.spec.id == stored["id"]
    assert {key: m.spec.to_dict()[key] for key in SPEC_FIELDS} == {key: stored[key] for key in SPEC_FIELDS}
    assert m.output_dim == stored["output_dim"]
    # The stored, resolved spec (with its id) is accepted as is.
    assert resolve_spec({key: stored[key] for key in (*SPEC_FIELDS, "id")}).id == stored["id"]


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["spec"]["method"] != "gcws"])
def test_dense_features(name):
    case = CASES[name]
    m = from_stored_spec(case)
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    Z64 = m.transform(X, dtype=np.float64)
    Z32 = m.transform(X)
    assert Z64.dtype == np.float64 and Z32.dtype == np.float32
    assert_dense_features_match(Z32, Z64, expected["transform_float32"], expected["transform_float64"])
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    np.testing.assert_allclose(frequencies[:3], expected["frequencies_head"], **RAW)
    if expected["offsets_head"] is None:
        assert offsets is None
    else:
        np.testing.assert_allclose(offsets[:5], expected["offsets_head"], **RAW)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["spec"]["method"] == "gcws"])
def test_gcws_codes(name):
    case = CASES[name]
    m = from_stored_spec(case)
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    codes = m.hash(X)
    assert codes.dtype == np.int64
    assert codes.tolist() == expected["hash"]
    features = m.transform(X)
    assert features.indices.tolist() == expected["indices"]
    assert features.dim == expected["dim"]
    assert features.scale == pytest.approx(expected["scale"], rel=1e-15)
    np.testing.assert_array_equal(m.kernel(X), np.array(expected["kernel"]))
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)


def test_gcws_zero_bit_codes_are_the_full_codes_index_part():
    """Same seed: the 0-bit code is i*, the full code is i* << 32 | zigzag(t*)."""
    full, zero_bit = CASES["gcws"], CASES["gcws_zero_bit"]
    assert full["input"] == zero_bit["input"] and full["spec"]["seed"] == zero_bit["spec"]["seed"]
    assert (np.array(full["expected"]["hash"]) >> 32).tolist() == zero_bit["expected"]["hash"]
    # b-bit indices are the low bits of i* inside each sample's block of 2^bits.
    bits = full["spec"]["params"]["bits"]
    k = full["spec"]["n_components"]
    expected_indices = (np.arange(k) << bits) + (np.array(zero_bit["expected"]["hash"]) & ((1 << bits) - 1))
    assert expected_indices.tolist() == full["expected"]["indices"]


@pytest.mark.parametrize("entry", GOLDEN["raw_streams"], ids=lambda e: f"{e['seed']}-{e['tag']}")
def test_raw_randomness(entry):
    words = randomness.raw_words(entry["seed"], entry["tag"], len(entry["words"]))
    assert words.dtype == np.uint64
    assert [int(w) for w in words] == entry["words"]
    np.testing.assert_array_equal(randomness.uniform_open(words), entry["uniform_open"])
    np.testing.assert_allclose(randomness.normal(words), entry["normal"], **RAW)
    np.testing.assert_allclose(randomness.cauchy(words), entry["cauchy"], **RAW)
    np.testing.assert_allclose(randomness.phase(words), entry["phase"], **RAW)
    assert int(randomness.counter_key(entry["seed"], entry["tag"])) == entry["counter_key"]


# -- params.empty_rows (tests/golden/empty_rows.json, make_golden_empty_rows.py) ----------------------------------

EMPTY_ROWS_CASES = json.loads((Path(__file__).resolve().parent / "golden" / "empty_rows.json").read_text())["cases"]


@pytest.mark.parametrize("name", list(EMPTY_ROWS_CASES))
def test_empty_rows_option(name):
    """The spec keeps its id and its all-zero row its explicit result; the other rows get what the map without
    the option gives them (`empty_rows` "error" is the default, left out of the stored params)."""
    case = EMPTY_ROWS_CASES[name]
    stored, expected = case["spec"], case["expected"]
    assert create_map(case["request"]).spec.id == stored["id"]
    m = from_stored_spec(case)
    X = np.array(case["input"], dtype=np.float64)
    empty = np.flatnonzero(~X.any(axis=1))
    others = np.flatnonzero(X.any(axis=1))
    without = create_map({**case["request"], "params": {k: v for k, v in case["request"]["params"].items()
                                                        if k != "empty_rows"}})
    assert "empty_rows" not in without.spec.params and without.spec.id != stored["id"]
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)
    if m.one_hot:
        codes = m.hash(X)
        assert codes.tolist() == expected["hash"] and (codes[empty] == EMPTY_CODE).all()
        np.testing.assert_array_equal(codes[others], without.hash(X[others]))
        features = m.transform(X)
        assert features.indices.tolist() == expected["indices"] and features.dim == expected["dim"]
        np.testing.assert_array_equal(features.indices[others], without.transform(X[others]).indices)
        np.testing.assert_array_equal(m.kernel(X), np.array(expected["kernel"]))
        return
    Z64, Z32 = m.transform(X, dtype=np.float64), m.transform(X)
    assert_dense_features_match(Z32, Z64, expected["transform_float32"], expected["transform_float64"])
    assert not Z64[empty].any() and not Z32[empty].any()
    np.testing.assert_array_equal(Z64[others], without.transform(X[others], dtype=np.float64))
    np.testing.assert_allclose(m.kernel(X), expected["kernel"], rtol=1e-12, atol=1e-12)
