"""GCWS with sampler "dart" (DartMinHash, app/featurehash/maps/minhash/gcws_dart.py) against the exact GMM / pGMM.

Statistics as in test_gcws.py: the first darts of the k buckets are independent weighted minhashes, each
equal for u and v with probability exactly GMM(u, v), so a pair's match fraction is Binomial(k, G)/k. Per
pair: within 4 binomial sd (floored at 1/k); per family: no common bias (standardised sum within 4) and
the mean squared z-score, a mean of n chi-square(1) variables (mean 1, variance 2/n), within 4 of its
standard errors of 1 on both sides: over-dispersion means correlated buckets, under-dispersion codes that
are not random enough. With 100 pairs per family the chance a correct sampler trips a per-pair check is
< 1%; all seeds are fixed, so the outcome is deterministic.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from test_gcws import (DENSE_DIM, K, SPARSE_DIM, Z_MAX, assert_binomial_family, binomial_sd, dense_kinds,
                       dense_pairs, gmm_reference, pair_gmm, pair_match, scrambled_csr, sparse_pairs)

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "gcws_dart.json").read_text())
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


def dart(input_dim: int, n_components: int = K, seed: int = 7, **params):
    return create_map({"method": "gcws", "input_dim": input_dim, "n_components": n_components, "seed": seed,
                       "params": {"sampler": "dart", **params}})


def assert_law(fraction, exact, trials: int, what: str) -> dict:
    """The per-pair and family checks of the module docstring; returns the figures."""
    assert_binomial_family(fraction, exact, trials, what)
    inner = (exact > 0.01) & (exact < 0.99)
    z = (fraction - exact) / binomial_sd(exact, trials)
    mean_square = float(np.mean(z[inner] ** 2))
    assert abs(mean_square - 1) <= Z_MAX * np.sqrt(2 / inner.sum()), f"{what}: mean z^2 = {mean_square:.3f}"
    return {"max_abs_z": float(np.abs(z).max()), "mean_z2": mean_square}


@pytest.fixture(scope="module")
def dense_data():
    return dense_pairs()


@pytest.fixture(scope="module")
def sparse_data():
    return sparse_pairs()


# ---------------------------------------------------------------- 1. collision law


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("family", ["dense", "sparse"])
def test_match_fraction_is_gmm(dense_data, sparse_data, family, power):
    """100 pairs with mixed signs spanning GMM 0..1, k = 4096: exact at the ends, binomial in between."""
    U, V = dense_data if family == "dense" else sparse_data
    m = dart(U.shape[1], power=power)
    G = pair_gmm(U, V, power)
    F = pair_match(m.hash(U), m.hash(V))
    assert_law(F, G, K, f"{family}, power {power}")
    assert F[G == 1].min() == 1 and F[G == 0].max() == 0


def test_law_holds_at_extreme_scales():
    """No anchor in the sampler: pairs scaled by 1e-300 or 1e300 (and |x|^2 up to 2^1993, beyond float64)
    keep the law; GMM is scale-free, so the exact value is that of the unscaled pair."""
    U, V = dense_pairs(seed=21, n=30)
    for scale, power in ((1e-300, 1.0), (1e300, 1.0), (1e200, 2.0), (1e-200, 0.5)):
        m = dart(DENSE_DIM, 2048, power=power)
        F = pair_match(m.hash(U * scale), m.hash(V * scale))
        G = pair_gmm(U, V, power)
        z = (F - G) / binomial_sd(G, 2048)
        assert np.abs(z).max() <= Z_MAX, (scale, power, z)


def test_huge_index_space():
    """input_dim 2^30 (2^31 signed coordinates): the darts of a coordinate come from its own stream."""
    d, k, n = 2**30, 1024, 20
    rng = np.random.default_rng(5)
    rows_u, rows_v, G = [], [], []
    for _ in range(n):
        support = np.sort(rng.choice(d, 60, replace=False))
        support[-1] = d - 1  # the last coordinate, 2^31 - 1 when negative, is exercised
        u = rng.standard_normal(60)
        v = np.where(rng.random(60) < 0.7, u * (1 + rng.uniform(0, 1) * rng.standard_normal(60)), 0.0)
        v[0] = v[0] or 1.0
        rows_u.append((support, u))
        rows_v.append((support, v))
        G.append(gmm_reference(u, v))

    def csr(rows):
        indptr = np.cumsum([0] + [len(s) for s, _ in rows])
        return sp.csr_matrix((np.concatenate([x for _, x in rows]), np.concatenate([s for s, _ in rows]), indptr),
                             shape=(n, d))

    m = dart(d, k)
    F = pair_match(m.hash(csr(rows_u)), m.hash(csr(rows_v)))
    G = np.array(G)
    assert np.abs((F - G) / binomial_sd(G, k)).max() <= Z_MAX
    assert m.samples(csr(rows_u))[0].max() < 2**31


@pytest.mark.parametrize("rows", [2, 8])
def test_band_collision_rate_is_gmm_to_the_r(dense_data, rows):
    """LSH bands of r codes collide with probability GMM^r, independently across bands."""
    U, V = dense_data
    m = dart(DENSE_DIM)
    equal = (m.hash(U) == m.hash(V)).reshape(U.shape[0], K // rows, rows)
    assert_binomial_family(equal.all(axis=2).mean(axis=1), pair_gmm(U, V) ** rows, K // rows, f"bands of {rows}")


# ---------------------------------------------------------------- 2. 0-bit and b-bit


def test_zero_bit_codes_are_i_star_and_approximate_gmm(dense_data, sparse_data):
    """As for ICWS (test_gcws.py, same bound and the same restriction to additive differences): 0-bit
    keeps the element of the first dart, so F0 >= F, and its excess over GMM is small."""
    additive = ~np.isin(np.array(dense_kinds()), ["rescaled", "multiplicative noise"])
    families = {"dense": (DENSE_DIM, K, *dense_data, additive),
                "sparse": (SPARSE_DIM, 1024, *sparse_data, slice(None))}
    for name, (d, k, U, V, bounded) in families.items():
        full, zero_bit = dart(d, k), dart(d, k, zero_bit=True)
        np.testing.assert_array_equal(zero_bit.hash(U), full.samples(U)[0])
        G = pair_gmm(U, V)
        F = pair_match(full.hash(U), full.hash(V))
        F0 = pair_match(zero_bit.hash(U), zero_bit.hash(V))
        assert np.all(F0 >= F), name
        assert F0[G == 0].max() == 0 and F0[G == 1].min() == 1, name
        G, F0 = G[bounded], F0[bounded]
        noise = np.mean(np.sqrt(2 / np.pi) * np.sqrt(G * (1 - G) / k))
        assert np.abs(F0 - G).mean() <= noise + 0.01, name


@pytest.mark.parametrize("bits", [1, 4, 8])
def test_index_b_bit_features_inner_product_is_low_bit_match_fraction(dense_data, bits):
    """bit_source "index" (specs stored before the parameter); "mixed_code" is tested in test_gcws.py."""
    U, V = dense_data[0][:40], dense_data[1][:40]
    m = dart(DENSE_DIM, bits=bits, bit_source="index")
    fu, fv = m.transform(U), m.transform(V)
    assert fu.dim == m.output_dim == K << bits and fu.scale == 1 / np.sqrt(K)
    block_start = np.arange(K) << bits
    mask = (1 << bits) - 1
    np.testing.assert_array_equal(fu.indices - block_start, m.samples(U)[0] & mask)
    expected = ((m.samples(U)[0] & mask)[:, None, :] == (m.samples(V)[0] & mask)[None, :, :]).mean(axis=2)
    np.testing.assert_array_equal((fu.to_csr() @ fv.to_csr().T).toarray(), expected)  # k = 2^12: exact


def test_b_bit_match_fraction_follows_the_full_codes(dense_data):
    """b-bit matches are full matches plus chance agreements of the low bits: F <= F_b, and F_b is close
    to F + (1 - F) 2^-b (Li's b-bit estimate) when the other elements' low bits look random."""
    U, V = dense_data
    m = dart(DENSE_DIM, bits=4, bit_source="index")
    F = pair_match(m.hash(U), m.hash(V))
    Fb = m.kernel(U, V).diagonal()
    assert np.all(Fb >= F)
    assert np.abs(Fb - (F + (1 - F) / 16)).mean() < 0.03


# ---------------------------------------------------------------- 3. the same codes everywhere


def test_dense_and_sparse_layouts_give_identical_codes(dense_data):
    U, _ = dense_data
    m = dart(DENSE_DIM, 512)
    expected = m.hash(U)
    layouts = {"csr": sp.csr_matrix(U), "scrambled csr": scrambled_csr(U, np.random.default_rng(3)),
               "csc": sp.csc_matrix(U), "fortran dense": np.asfortranarray(U), "float32": U.astype(np.float32)}
    for name, X in layouts.items():
        if name == "float32":
            expected32 = m.hash(U.astype(np.float32).astype(np.float64))
            np.testing.assert_array_equal(m.hash(X), expected32, err_msg=name)
        else:
            np.testing.assert_array_equal(m.hash(X), expected, err_msg=name)


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_codes_do_not_depend_on_the_batch_or_threads(dense_data, sparse_data, layout):
    X = dense_data[0] if layout == "dense" else sparse_data[0]
    m = dart(X.shape[1], 256)
    everything = m.hash(X)  # 100 rows: the parallel kernel
    for r in range(0, X.shape[0], 7):  # single rows: the serial kernel
        np.testing.assert_array_equal(m.hash(X[r:r + 1]), everything[r:r + 1])
    rng = np.random.default_rng(6)
    for size in (3, 13, 50):
        rows = rng.choice(X.shape[0], size, replace=False)
        np.testing.assert_array_equal(m.hash(X[rows]), everything[rows])
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        np.testing.assert_array_equal(m.hash(X), everything)
    finally:
        numba.set_num_threads(threads)


def test_codes_do_not_depend_on_the_rank_limit(sparse_data):
    """The first dart of a bucket is the same whatever rank limit reaches it: 16x more darts, or so few
    that most rows must double the limit several times, give the same codes."""
    X = sparse_data[0][:30]
    m = dart(SPARSE_DIM, 512, power=0.5)
    expected = m.hash(X)
    target = m._darts.target
    for factor in (16.0, 1 / 64):
        m._darts.target = target * factor
        np.testing.assert_array_equal(m.hash(X), expected, err_msg=str(factor))
    m._darts.target = target


def test_randomness_depends_on_seed_and_coordinate_only(dense_data):
    """A vector hashes the same in a wider input space; another seed, or the ICWS sampler, gives others."""
    U = dense_data[0][:20]
    narrow, wide = dart(DENSE_DIM, 128), dart(2**20, 128)
    Uc = sp.csr_matrix(U)
    np.testing.assert_array_equal(wide.hash(sp.csr_matrix((Uc.data, Uc.indices, Uc.indptr), shape=(20, 2**20))),
                                  narrow.hash(U))
    assert (dart(DENSE_DIM, 128, seed=8).hash(U) != narrow.hash(U)).mean() > 0.5
    icws = create_map({"method": "gcws", "input_dim": DENSE_DIM, "n_components": 128, "seed": 7})
    assert (icws.samples(U)[0] != narrow.samples(U)[0]).mean() > 0.5


# ---------------------------------------------------------------- 4. codes, spec, errors


def test_code_layout(dense_data, sparse_data):
    """code = i* << 32 | dart identity; i* = 2c (+1 if negative); equal codes iff equal (i*, dart)."""
    for X in (np.vstack(dense_data), sp.vstack(sparse_data, format="csr")):
        m = dart(X.shape[1], 512)
        codes = m.hash(X)
        i_star, identity = m.samples(X)
        assert codes.min() >= 0 and identity.min() >= 0 and identity.max() < 2**32
        np.testing.assert_array_equal(codes >> 32, i_star)
        np.testing.assert_array_equal(codes & 0xFFFFFFFF, identity)
        dense = X.toarray() if sp.issparse(X) else X
        rows = np.arange(X.shape[0])[:, None]
        assert np.all(dense[rows, i_star // 2] * np.where(i_star % 2, -1, 1) > 0)  # a nonzero of the right sign
    m = dart(6, 64)
    i_star, _ = m.samples(np.array([[0, 0, 0, 2.5, 0, 0], [0, -0.1, 0, 0, 0, 0]]))
    assert np.all(i_star[0] == 6) and np.all(i_star[1] == 3)


def test_sampler_param_keeps_existing_ids():
    """At its default the sampler is left out of the stored params: the spec made before the parameter
    existed and the same spec with "icws" spelled out have one id; "dart" is a different map."""
    base = {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15, "params": {"bits": 4}}
    implicit = create_map(base)
    explicit = create_map({**base, "params": {"bits": 4, "sampler": "icws"}})
    darts = create_map({**base, "params": {"bits": 4, "sampler": "dart"}})
    assert implicit.spec.id == explicit.spec.id and "sampler" not in explicit.spec.params
    assert implicit.params.sampler == "icws" and darts.spec.params["sampler"] == "dart"
    assert darts.spec.id != implicit.spec.id
    stored = darts.describe()
    assert resolve_spec({key: stored[key] for key in (*SPEC_FIELDS, "id")}).id == darts.spec.id
    with pytest.raises(SpecError) as info:
        create_map({**base, "params": {"sampler": "bagminhash"}})
    assert info.value.field == "params.sampler"


def test_dart_map_has_no_table_and_refuses_out_of_range_weights():
    m = dart(10, 64, power=1e6)
    assert not m.uses_table and m.nbytes == m.planned_nbytes == 64 * 8  # the keys of the feature bits only
    with pytest.raises(InputError) as info:
        m.hash(np.array([[1e300] + [0.0] * 9]))
    assert info.value.field == "vectors"
    assert m.hash(np.array([[1.0001] + [0.0] * 9])).shape == (1, 64)
    with pytest.raises(InputError):
        dart(10, 64).hash(np.zeros((1, 10)))


# ---------------------------------------------------------------- 5. golden codes


@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_golden_codes(name):
    case = GOLDEN["cases"][name]
    stored = case["spec"]
    assert create_map(case["request"]).spec.id == stored["id"]
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    assert m.hash(X).tolist() == expected["hash"]
    assert m.hash(sp.csr_matrix(X)).tolist() == expected["hash"]
    features = m.transform(X)
    assert features.indices.tolist() == expected["indices"] and features.dim == expected["dim"]
    assert features.scale == pytest.approx(expected["scale"], rel=1e-15)
    np.testing.assert_array_equal(m.kernel(X), np.array(expected["kernel"]))
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)


def test_weights_of_exactly_a_power_of_two_keep_their_codes():
    """Rows of 0/1 and power-of-two weights (mantissa 1: the band whose darts the weight test refused is now
    not thrown) among other weights, GMM and pGMM: the SHA-256 of the codes the sampler gave before that
    shortcut (computed at commit 0610ed2), so the shortcut changed no code."""
    rng = np.random.default_rng(44)
    n, d = 40, 5000
    cols = [np.sort(rng.choice(d, size=int(rng.integers(1, 120)), replace=False)) for _ in range(n)]
    data = [rng.choice([1.0, 1.0, 1.0, 2.0, 0.5, -4.0, 1.5], size=c.size) for c in cols]
    X = sp.csr_matrix((np.concatenate(data), np.concatenate(cols),
                       np.concatenate([[0], np.cumsum([c.size for c in cols])])), shape=(n, d))
    pinned = {1.0: "effd44715d2d6125a2e3e7f8bca9c97f6fccfb1d349c36619148437fc5c0dd40",
              2.0: "a452016c85ed928a1552dadebad2fb769f137a1c2ed95837d51582811b38fb31"}
    for power, digest in pinned.items():
        m = create_map({"method": "gcws", "input_dim": d, "n_components": 128, "seed": 7,
                        "params": {"sampler": "dart", "power": power}})
        assert hashlib.sha256(np.ascontiguousarray(m.hash(X)).tobytes()).hexdigest() == digest
