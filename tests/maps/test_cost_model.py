"""The CPU cost model (featurehash.maps.cost): its formulas and the budget checks of create_map. How far it
over-estimates measured CPU is a machine's figure: bench/bench_cost_model.py prints it (never a timed test)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from featurehash.maps import METHODS, InputError, SpecError, create_map, requested_spec
from featurehash.maps import cost
from featurehash.maps._cost_formulas import FORMULAS, U, lg

# As the service runs (settings.blas_threads = 1), and as the bench calibrated it: a CPU time of one thread.
pytestmark = pytest.mark.usefixtures("single_threaded_blas")
RNG = np.random.default_rng(5)
FIT_SAMPLE = (RNG.random((160, 8)) + 0.05).round(4).tolist()

# One small map of every method, (spec, rows): each transform or creation takes a few milliseconds.
SMALL = [
    ({"method": "rff", "input_dim": 64, "n_components": 1024}, 512),
    ({"method": "rff", "input_dim": 256, "n_components": 1024, "params": {"frequencies": "structured"}}, 512),
    ({"method": "rff", "input_dim": 32, "n_components": 512, "params": {"frequencies": "orthogonal"}}, 512),
    ({"method": "nrff", "input_dim": 64, "n_components": 1024}, 512),
    ({"method": "srf", "input_dim": 16, "n_components": 512}, 512),
    ({"method": "skewed_chi2", "input_dim": 64, "n_components": 1024}, 512),
    ({"method": "random_maclaurin", "input_dim": 64, "n_components": 256}, 512),
    ({"method": "tensorsketch", "input_dim": 64, "n_components": 1024, "params": {"degree": 4}}, 256),
    ({"method": "gcws", "input_dim": 64, "n_components": 64}, 256),
    ({"method": "gcws", "input_dim": 64, "n_components": 64, "params": {"sampler": "dart"}}, 256),
    ({"method": "binning", "input_dim": 64, "n_components": 64}, 256),
    ({"method": "quadrature", "input_dim": 16, "n_components": 512}, 512),
    ({"method": "ssf", "input_dim": 64, "n_components": 1024}, 512),
    ({"method": "additive_chi2", "input_dim": 64, "n_components": 192}, 1024),
    ({"method": "nystroem", "input_dim": 8, "n_components": 32, "params": {"fit_sample": FIT_SAMPLE}}, 1024),
]


def test_every_method_has_one_formula():
    assert set(FORMULAS) == set(METHODS)
    for formula in set(map(type, FORMULAS.values())):
        assert formula.__doc__ and "row" in formula.__doc__   # the formula, stated


def test_formulas_count_the_work_they_state():
    rff = requested_spec({"method": "rff", "input_dim": 100, "n_components": 2000})
    per_row = 100 * 1000 * U.madd + 2000 * U.trig + 100 * U.element   # z F madd + D trig + z element
    assert cost.transform_cost(rff, 10) == pytest.approx(FORMULAS["rff"].fixed + 10 * per_row * 1e-9)
    assert cost.creation_cost(rff).seconds == pytest.approx(FORMULAS["rff"].fixed + (1000 * 100 + 1000) * U.random
                                                            * 1e-9)
    ts = requested_spec({"method": "tensorsketch", "input_dim": 10, "n_components": 4096, "params": {"degree": 5}})
    fft = 4096 * 12 * U.fft
    expected = 5 * (10 * U.sparse_madd + 12 * 4096 * U.element + fft) + fft
    assert cost.transform_cost(ts, 3) == pytest.approx(FORMULAS["tensorsketch"].fixed + 3 * expected * 1e-9)
    assert lg(4096) == 12
    # Linear in the rows, and the most rows that fit a budget do fit it (one more does not).
    budget = 0.5
    most = cost.rows_within(ts, budget, 10)
    assert cost.transform_cost(ts, most) <= budget < cost.transform_cost(ts, most + 1)


def test_a_stored_spec_costs_no_fit():
    raw = {"method": "ssf", "input_dim": 64, "n_components": 1024, "seed": 3}
    new = cost.creation_cost(requested_spec(raw)).seconds
    stored = cost.creation_cost(requested_spec(create_map(raw).describe())).seconds
    assert stored < new / 10


@pytest.mark.parametrize("raw, field", [
    ({"method": "tensorsketch", "input_dim": 64, "n_components": 2**22, "params": {"degree": 64}}, "params.degree"),
    ({"method": "rff", "input_dim": 16, "n_components": 2**22, "params": {"frequencies": "structured"}},
     "n_components"),
    ({"method": "ssf", "input_dim": 2**14, "n_components": 2**18}, "n_components"),
])
def test_create_map_refuses_over_the_budget_at_once(raw, field):
    start = time.perf_counter()
    with pytest.raises(SpecError) as refused:
        create_map(raw, max_work_seconds=10.0)
    assert time.perf_counter() - start < 1.0
    assert refused.value.field == field and "s of CPU" in refused.value.message
    assert cost.creation_cost(requested_spec(raw)).seconds > 0   # and the library still builds it without a budget


def test_check_rows_names_the_field_and_the_rows_that_fit():
    spec = requested_spec({"method": "rff", "input_dim": 64, "n_components": 1024})
    most = cost.rows_within(spec, 0.05, 64)
    cost.check_rows(spec, most, most * 64, 0.05)
    with pytest.raises(InputError) as refused:
        cost.check_rows(spec, most + 1, (most + 1) * 64, 0.05)
    assert refused.value.field == "vectors" and f"send at most {most} rows" in refused.value.message


@pytest.mark.parametrize("raw, rows", SMALL, ids=[f"{r['method']}-{r.get('params', {}).get('frequencies', '')}"
                                                  f"{r.get('params', {}).get('sampler', '')}" for r, _ in SMALL])
def test_every_method_is_priced_and_its_price_grows_with_the_work(raw, rows):
    """Prices only (no clock: how close they are to measured CPU is bench/bench_cost_model.py's to say, on the
    machine at hand): positive and finite, more rows cost more, and sparse rows cost more with more nonzeros."""
    spec = requested_spec({**raw, "seed": 11})
    created = cost.creation_cost(spec).seconds
    assert 0 < created < float("inf")
    one, many = cost.transform_cost(spec, rows), cost.transform_cost(spec, 2 * rows)
    assert 0 < one < many
    few = cost.transform_cost(spec, rows, rows * 2, sparse=True)
    assert 0 < few <= cost.transform_cost(spec, rows, rows * raw["input_dim"], sparse=True)


def _text_seconds(params: dict, characters: float, text_input: str | None = "documents") -> float:
    spec = requested_spec({"method": "hashing", "n_components": 2**20, "params": params})
    return FORMULAS["hashing"].row(spec, characters, text_input=text_input).seconds


def test_the_text_formula_prices_the_compiled_pass_per_character_gram_and_gram_character():
    # word: at most one token per 3 characters (2 word characters and a separator), N grams a token
    word = U.text_scan + 1 / 3 * U.text_gram + 1 / 2 * U.text_gram_char
    assert _text_seconds({}, 1000) == pytest.approx(1000 * word * 1e-9)
    # char (2, 6): 5 grams a character, 2 + 3 + 4 + 5 + 6 = 20 characters hashed a character
    char = U.text_scan + 5 * U.text_gram + 20 * U.text_gram_char
    assert _text_seconds({"analyzer": "char", "ngram_range": [2, 6]}, 1000) == pytest.approx(1000 * char * 1e-9)
    # linear in the characters; more n sizes cost more; char n-grams cost more than word n-grams of the same range
    assert _text_seconds({}, 2000) == pytest.approx(2 * _text_seconds({}, 1000))
    assert _text_seconds({"ngram_range": [1, 3]}, 1000) > _text_seconds({"ngram_range": [1, 2]}, 1000) \
        > _text_seconds({}, 1000)
    assert _text_seconds({"analyzer": "char_wb", "ngram_range": [1, 2]}, 1000) > _text_seconds({"ngram_range": [1, 2]}, 1000)


def test_text_outside_the_compiled_pass_keeps_python_s_price():
    # a custom token_pattern, token lists and an unknown input kind take Python's analyzer: N text_character
    for params, kind in (({"token_pattern": r"(?u)\b\w+\b"}, "documents"), ({}, "tokens"), ({}, None)):
        assert _text_seconds(params, 1000, kind) == pytest.approx(1000 * U.text_character * 1e-9)
    assert _text_seconds({"ngram_range": [1, 3]}, 1000, "tokens") == pytest.approx(3000 * U.text_character * 1e-9)
    # the compiled price stays below Python's for the same settings
    assert _text_seconds({"ngram_range": [1, 3]}, 1000) < _text_seconds({"ngram_range": [1, 3]}, 1000, "tokens")


def test_the_pricing_token_pattern_is_the_analyzers_default():
    from featurehash.maps import _cost_formulas
    from featurehash.maps.text.analyzers import DEFAULT_TOKEN_PATTERN

    assert _cost_formulas.DEFAULT_TOKEN_PATTERN == DEFAULT_TOKEN_PATTERN
