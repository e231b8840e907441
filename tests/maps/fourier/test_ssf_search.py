"""The compiled SSF index-set search (`_ssf_search_kernels`) is the numpy search it replaced
(tests/ssf_reference_search.py), bit for bit:
- h (the exponential sums) and the exact objectives have the same bits as the numpy formulas;
- the searches pick the very same index sets (exact and shortlist modes, both point sets, m a power
  of two or not);
- the kernels compile without fused multiply-adds (which would change the bits on another CPU).
"""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest
import scipy.fft
import ssf_reference_search as reference
from featurehash.maps.fourier import _ssf_search_kernels as kernels
from featurehash.maps.fourier import ssf_search

FUSED_MULTIPLY_ADD = re.compile(r"\bv?f(n?m(add|sub)|mla|mls)\w*", re.IGNORECASE)


@pytest.mark.parametrize("m,n", [(3, 7), (64, 256), (100, 300), (2048, 4096)])
def test_exponential_sums_have_the_numpy_bits(m, n):
    indices = ssf_search.random_index_set(m, n, 4)
    expected = reference._exponentials(indices, n)
    np.testing.assert_array_equal(ssf_search._exponentials(indices, n).view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("points", ssf_search.POINT_SETS)
@pytest.mark.parametrize("m,n", [(5, 12), (64, 256), (96, 384), (1024, 2048)])
def test_exact_objectives_have_the_numpy_bits(points, m, n):
    start = ssf_search.random_index_set(m, n, 9)
    compiled = ssf_search._CoordinateSearch(start, n, points)
    numpy_search = reference.ReferenceCoordinateSearch(start, n, points)
    removed = int(start[1])
    base_full = numpy_search.h_full - numpy_search.column(removed, np.arange(n))
    free = np.empty(n, dtype=np.int64)
    count = kernels.prepare_coordinate(compiled.h_real, compiled.h_imag, removed, compiled.used, compiled.cos_table,
                                       compiled.sin_table, m, compiled.antipodal, True, compiled.base_real,
                                       compiled.base_imag, compiled.gradient, compiled.curvature, free)
    np.testing.assert_array_equal(free[:count], np.flatnonzero(~compiled.used))
    np.testing.assert_array_equal(compiled.base_real, base_full.real)
    np.testing.assert_array_equal(compiled.base_imag, base_full.imag)
    candidates = np.concatenate(([removed], np.flatnonzero(~compiled.used)))
    expected = numpy_search.exact_objectives(base_full[numpy_search.p], candidates)
    np.testing.assert_array_equal(compiled.exact_objectives(candidates).view(np.int64), expected.view(np.int64))
    free = np.flatnonzero(~compiled.used)
    if free.size > ssf_search.SHORTLIST:
        expected = numpy_search.ranked_candidates(base_full, free, ssf_search.SHORTLIST)
        np.testing.assert_array_equal(compiled.ranked_candidates(free, ssf_search.SHORTLIST), expected)
        shortlisted = np.empty(ssf_search.SHORTLIST + 1, dtype=np.int64)
        if kernels.shortlist(*compiled._ranking_transforms(), free, m, ssf_search.SHORTLIST, removed, shortlisted):
            np.testing.assert_array_equal(shortlisted, np.concatenate(([removed], expected)))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_the_direct_inverse_dft_is_scipys(dtype):
    x = np.random.default_rng(2).standard_normal(4096 * (2 if dtype == np.complex128 else 1)).view(dtype)
    np.testing.assert_array_equal(ssf_search._inverse_dft(x).view(np.int64), scipy.fft.ifft(x, norm="forward").view(np.int64))


def test_a_tie_at_the_shortlist_edge_is_left_to_numpy():
    candidates = np.empty(3, dtype=np.int64)
    linear = np.array([0, 3, 2, 2, 1], dtype=np.complex128)   # k = 2 and 3 tie for the second place
    assert not kernels.shortlist(linear, np.zeros(5, np.complex128), np.arange(1, 5), 1, 2, 0, candidates)
    assert kernels.shortlist(linear, np.zeros(5, np.complex128), np.arange(1, 5), 1, 1, 0, candidates)
    assert candidates[:2].tolist() == [0, 1]


@pytest.mark.parametrize("m,n,seed,points", [
    (3, 6, 0, "antipodal"), (8, 16, 0, "antipodal"), (32, 100, 5, "antipodal"), (100, 300, 0, "antipodal"),
    (64, 256, 2, "columns"), (128, 512, 3, "antipodal"), (392, 1024, 7, "antipodal"), (512, 1024, 0, "columns"),
])
def test_search_picks_the_numpy_search_set(m, n, seed, points):
    ssf_search.optimised_index_set.cache_clear()
    assert ssf_search.optimised_index_set(m, n, seed, points).index_set == reference.reference_index_set(m, n, seed, points)


def test_search_kernels_compile_without_fused_multiply_add():
    n, half = 16, 8
    tables = (np.cos(np.arange(n) * 0.3), np.sin(np.arange(n) * 0.3))
    calls = [
        (kernels.exponentials, (np.arange(3), *tables, np.empty(n), np.empty(n))),
        (kernels.add_column, (np.ones(n), np.ones(n), 3, -1, *tables, np.empty(n), np.empty(n))),
        (kernels.ranking_inputs, (np.ones(n) * 0.1, np.ones(n) * 0.2, 4, True, np.empty(n, np.complex128),
                                  np.empty(n))),
        (kernels.exact_objectives, (np.ones(half) * 0.1, np.ones(half) * 0.2, np.arange(3), *tables, np.ones(half), 4,
                                    True, 1e-12, np.empty(3))),
        (kernels.shortlist_scores, (np.ones(n, np.complex128), np.ones(n, np.complex128), np.arange(4), 4,
                                    np.empty(4))),
        (kernels.shortlist, (np.arange(n) * (1 + 0j), np.ones(n, np.complex128), np.arange(6), 4, 3, 9,
                             np.empty(4, np.int64))),
        (kernels.packed_ranking_input, (np.arange(n) * (1 + 2j), np.ones(n), np.empty(n, np.complex128))),
        (kernels.prepare_coordinate, (np.ones(n), np.ones(n), 3, np.zeros(n, np.bool_), *tables, 4, True, True,
                                      np.empty(n), np.empty(n), np.empty(n, np.complex128), np.empty(n),
                                      np.empty(n, np.int64))),
    ]
    for kernel, arguments in calls:
        fresh = numba.njit(error_model="numpy")(kernel.py_func)
        fresh(*arguments)
        assembly = "\n".join(fresh.inspect_asm().values())
        assert "ret" in assembly and not FUSED_MULTIPLY_ADD.search(assembly), kernel.__name__


def test_one_packed_fft_gives_the_two_ranking_transforms():
    m, n = 1024, 4096
    search = ssf_search._CoordinateSearch(ssf_search.random_index_set(m, n, 3), n, "antipodal")
    free = np.empty(n, dtype=np.int64)
    kernels.prepare_coordinate(search.h_real, search.h_imag, int(search.indices[5]), search.used, search.cos_table,
                               search.sin_table, m, True, True, search.base_real, search.base_imag, search.gradient,
                               search.curvature, free)
    linear, quadratic = search._ranking_transforms()
    packed_linear, packed_quadratic = search._packed_ranking_transforms()
    for full, packed in ((linear.real, packed_linear), (quadratic.real, packed_quadratic)):
        np.testing.assert_allclose(packed, full, rtol=0, atol=1e-13 * np.abs(full).max())


@pytest.mark.parametrize("m,n", [(64, 512), (200, 512)])
def test_small_gain_search_reaches_the_same_energy(m, n):
    """"until_small_gain" (new requests) against "until_unchanged": a final energy within a small fraction of
    the spread of the energy over random sets (what the search is there to beat; it gains many of them)."""
    random_energies = [ssf_search.riesz_log_energy(ssf_search.random_index_set(m, n, 100 + i), n) for i in range(10)]
    spread = np.std(random_energies, ddof=1)
    for seed in range(3):
        old = ssf_search.optimised_index_set(m, n, seed, "antipodal", "until_unchanged")
        new = ssf_search.optimised_index_set(m, n, seed, "antipodal", "until_small_gain")
        assert not old.exact and not new.exact  # the shortlist path
        assert new.converged
        assert new.final_energy - old.final_energy < 0.25 * spread
        assert old.initial_energy - old.final_energy > 2 * spread
