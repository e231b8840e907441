"""Random binning features (docs/methods/minhash.md, "Random binning"; app/featurehash/maps/minhash/binning.py)
against the exact Laplacian kernel, the code layout, sparse input, LSH bands, speed, the spec, the service and
golden vectors.

Statistics: in each grid the d bins of x and y all agree with probability exactly
k(x, y) = exp(-gamma ||x - y||_1) (pitch ~ Gamma(2, 1/gamma) per coordinate, independent coordinates),
independently across grids, so the code match fraction over P grids is Binomial(P, k) / P with standard
deviation sqrt(k (1 - k) / P). As in tests/maps/minhash/test_gcws.py, every pair must be within 4 of those (floored at
1/P, for pairs with k near 0 or 1), with 100 pairs a false alarm has probability ~100 * 6e-5 < 1%; a common
bias is checked over the family, grid by grid (see `assert_binomial_family`). Seeds are fixed: the outcome
is deterministic.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from featurehash.maps import kernels
from featurehash.maps import SpecError, create_map, resolve_spec
from featurehash.lsh.banding import band_keys

P = 4096
N_PAIRS = 100
DIM = 12
Z_MAX = 4.0


def binning(input_dim: int, n_components: int = P, seed: int = 7, *, table_budget_bytes: int | None = None,
            **params):
    spec = {"method": "binning", "input_dim": input_dim, "n_components": n_components, "seed": seed,
            "params": {"gamma": 0.5, **params}}
    options = {} if table_budget_bytes is None else {"table_budget_bytes": table_budget_bytes}
    return create_map(spec, **options)


def laplacian_pairs(U, V, gamma: float) -> np.ndarray:
    """exp(-gamma ||u - v||_1) row by row, straight from the definition (independent of app/featurehash/maps/kernels.py)."""
    U = U.toarray() if sp.issparse(U) else U
    V = V.toarray() if sp.issparse(V) else V
    return np.exp(-gamma * np.abs(U - V).sum(axis=1))


def binomial_sd(p, trials: int) -> np.ndarray:
    return np.maximum(np.sqrt(p * (1 - p) / trials), 1.0 / trials)


def assert_binomial_family(matches, p, what: str) -> float:
    """matches: (pairs, grids) booleans. Every pair's match fraction within Z_MAX sd of p; no common bias.
    Returns the worst |z|.

    The pairs share the same P grids, so their deviations are correlated (a grid with coarse pitches
    makes many pairs match at once): a sum over pairs of per-pair z-scores is not N(0, 1) (measured sd
    1.8 over 30 seeds). The grids, though, are independent, so the bias is tested grid-wise: the number
    of matching pairs in grid p, S_p, is i.i.d. over p with mean sum_pairs k, and the mean of S_p over the
    P grids is within Z_MAX of its standard error (from the S_p themselves) of that.
    """
    matches, p = np.asarray(matches), np.asarray(p)
    grids = matches.shape[1]
    fraction = matches.mean(axis=1)
    z = (fraction - p) / binomial_sd(p, grids)
    worst = int(np.argmax(np.abs(z)))
    assert np.abs(z).max() <= Z_MAX, (
        f"{what}: pair {worst} has match fraction {fraction[worst]:.5f} vs exact {p[worst]:.5f} ({z[worst]:+.2f} sd)")
    per_grid = matches.sum(axis=0)
    bias_z = (per_grid.mean() - p.sum()) / (per_grid.std(ddof=1) / np.sqrt(grids))
    assert abs(bias_z) <= Z_MAX, f"{what}: common bias of {bias_z:+.2f} standard errors over {p.size} pairs"
    return float(np.abs(z).max())


def dense_pairs(seed: int = 11, n: int = N_PAIRS, d: int = DIM, gamma: float = 0.5):
    """Pairs spanning the kernel from ~0 to 1: an identical pair, then v = u + noise with l1 distances
    spread log-uniformly so that k = exp(-gamma ||u - v||_1) covers 0.005..0.995; mixed signs and scales,
    some coordinates left equal (zero difference), some rows with zeros."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, d)) * np.exp(rng.uniform(-1, 2, size=(n, 1)))
    U[rng.random((n, d)) < 0.2] = 0.0
    targets = np.exp(rng.uniform(np.log(0.01), np.log(10.0), size=n)) / gamma  # l1 distances
    direction = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.7)
    direction[:, 0] += 1e-3
    direction /= np.abs(direction).sum(axis=1, keepdims=True)
    V = U + direction * targets[:, None]
    V[0] = U[0]
    return U, V


@pytest.fixture(scope="module")
def pairs():
    return dense_pairs()


@pytest.fixture(scope="module")
def dense_map():
    return binning(DIM)


def reference_bins(m, X: np.ndarray) -> np.ndarray:
    """Bins (n, d, P) straight from the grid constants: floor(x * gamma / G - U3) = floor((x - u) / delta)."""
    inverse_pitch, shift = m.grid_constants()
    return np.floor(X[:, :, None] * inverse_pitch[None] - shift[None])


# ---------------------------------------------------------------------------------------
# (a) the grids and the codes
# ---------------------------------------------------------------------------------------

def test_pitches_are_gamma_distributed_and_shifts_uniform():
    """delta = 1 / inverse_pitch ~ Gamma(2, scale 1/gamma), u / delta = U3 ~ U(0, 1): Kolmogorov-Smirnov on
    40 x 512 draws, p > 1e-3 (a wrong law, e.g. Exp or Gamma(2, gamma), gives p < 1e-100)."""
    gamma = 0.5
    m = binning(40, 512, gamma=gamma)
    inverse_pitch, shift = m.grid_constants()
    assert inverse_pitch.shape == shift.shape == (40, 512)
    assert stats.kstest((1 / inverse_pitch).ravel(), stats.gamma(a=2, scale=1 / gamma).cdf).pvalue > 1e-3
    assert stats.kstest(shift.ravel(), stats.uniform.cdf).pvalue > 1e-3
    assert 0 < shift.min() and shift.max() < 1


def test_codes_are_equal_exactly_when_all_bins_are_equal(pairs):
    """Over all pairs of rows of U and V (200 x 200 x 64 grid comparisons), equal codes iff equal bins."""
    m = binning(DIM, 64)
    X = np.vstack(pairs)
    bins = reference_bins(m, X)
    codes = m.hash(X)
    assert codes.dtype == np.int64 and codes.min() >= 0 and codes.shape == (200, 64)
    same_bins = (bins[:, None, :, :] == bins[None, :, :, :]).all(axis=2)
    same_codes = codes[:, None, :] == codes[None, :, :]
    np.testing.assert_array_equal(same_codes, same_bins)
    off_diagonal = same_bins[~np.eye(200, dtype=bool)]
    assert 1000 < off_diagonal.sum() < 0.5 * off_diagonal.size  # both outcomes are exercised
    # Zero is in bin -1 everywhere; a vector whose bins are all -1 has code 0.
    np.testing.assert_array_equal(reference_bins(m, np.zeros((1, DIM))), -1)
    assert np.all(m.hash(np.zeros((2, DIM))) == 0)


def test_match_fraction_estimates_the_laplacian_kernel(pairs, dense_map):
    """The MUST SHOW: 100 pairs at P = 4096, each within 4 binomial sd of exp(-gamma ||x - y||_1)."""
    U, V = pairs
    K = laplacian_pairs(U, V, 0.5)
    assert K[0] == 1 and K.min() < 0.02 and K[1:].max() > 0.98
    assert ((K > 0.1) & (K < 0.9)).sum() >= 40
    matches = dense_map.hash(U) == dense_map.hash(V)
    F = matches.mean(axis=1)
    worst = assert_binomial_family(matches, K, "dense")
    print(f"binning, 100 pairs at P = {P}: worst pair {worst:.2f} binomial sd")
    assert F[0] == 1.0


@pytest.mark.parametrize("gamma", [0.1, 2.0])
def test_other_bandwidths(gamma):
    U, V = dense_pairs(seed=13, n=60, gamma=gamma)
    m = binning(DIM, 2048, seed=3, gamma=gamma)
    assert_binomial_family(m.hash(U) == m.hash(V), laplacian_pairs(U, V, gamma), f"gamma {gamma}")


def test_kernel_is_the_match_fraction_and_exact_is_laplacian(pairs, dense_map):
    U, V = pairs
    estimate = dense_map.kernel(U[:20], V[:20])
    codes_u, codes_v = dense_map.hash(U[:20]), dense_map.hash(V[:20])
    np.testing.assert_array_equal(estimate, (codes_u[:, None, :] == codes_v[None, :, :]).mean(axis=2))
    exact = dense_map.exact_kernel(U[:20], V[:20])
    np.testing.assert_allclose(exact, kernels.laplacian(U[:20], V[:20], 0.5), rtol=1e-14)
    np.testing.assert_allclose(exact.diagonal(), laplacian_pairs(U[:20], V[:20], 0.5), rtol=1e-12)
    z = (estimate - exact) / binomial_sd(exact, P)
    assert np.abs(z).max() <= Z_MAX
    assert np.all(dense_map.kernel(U[:20]).diagonal() == 1)


# ---------------------------------------------------------------------------------------
# (b) sparse input, huge input spaces, table vs on demand
# ---------------------------------------------------------------------------------------

def scrambled_csr(X: np.ndarray, rng) -> sp.csr_matrix:
    """The CSR of X with each row's entries in random order, explicit zeros mixed in and some entries
    split into two duplicates x/2 + x/2 (exact in floating point)."""
    data, indices, indptr = [], [], [0]
    for row in X:
        cols = np.flatnonzero(row)
        entries = [(c, row[c]) for c in cols] + [(c, 0.0) for c in np.setdiff1d(np.arange(X.shape[1]), cols)[:2]]
        for c in cols[rng.random(cols.size) < 0.3]:
            entries = [(cc, x / 2 if cc == c else x) for cc, x in entries] + [(c, row[c] / 2)]
        order = rng.permutation(len(entries))
        data += [entries[o][1] for o in order]
        indices += [entries[o][0] for o in order]
        indptr.append(len(data))
    return sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=X.shape)


def test_dense_and_sparse_inputs_give_identical_codes(pairs):
    U, _ = pairs
    m = binning(DIM, 512)
    expected = m.hash(U)
    scrambled = scrambled_csr(U, np.random.default_rng(3))
    assert not scrambled.has_sorted_indices and (scrambled.data == 0).any()
    for name, X in {"csr": sp.csr_matrix(U), "scrambled csr": scrambled, "csc": sp.csc_matrix(U),
                    "coo": sp.coo_matrix(U), "csr_array": sp.csr_array(U), "fortran": np.asfortranarray(U),
                    "lists": U.tolist(), "float32 values": U.astype(np.float32).astype(np.float64)}.items():
        if name == "float32 values":
            np.testing.assert_array_equal(m.hash(U.astype(np.float32)), m.hash(X), err_msg=name)
            continue
        np.testing.assert_array_equal(m.hash(X), expected, err_msg=name)


def test_table_and_on_demand_variates_give_identical_codes(pairs):
    U, V = pairs
    table, on_demand = binning(DIM, 256), binning(DIM, 256, table_budget_bytes=0)
    assert table.uses_table and not on_demand.uses_table
    for X in (U, V, sp.csr_matrix(U)):
        np.testing.assert_array_equal(table.hash(X), on_demand.hash(X))


def test_variates_depend_only_on_seed_grid_and_coordinate(pairs):
    """More grids extend fewer; a vector hashes the same in a wider (even 2^30-wide) space; another seed
    gives other codes."""
    U, _ = pairs
    short, long = binning(DIM, 100), binning(DIM, 300)
    np.testing.assert_array_equal(long.hash(U)[:, :100], short.hash(U))
    Uc = sp.csr_matrix(U)
    wide = binning(2**30, 100)
    assert not wide.uses_table and wide.planned_nbytes < 10_000
    np.testing.assert_array_equal(wide.hash(sp.csr_matrix((Uc.data, Uc.indices, Uc.indptr), shape=(len(U), 2**30))),
                                  short.hash(U))
    assert (binning(DIM, 100, seed=8).hash(U) != short.hash(U)).mean() > 0.5


def test_huge_sparse_space_estimates_the_kernel():
    """input_dim 2^30, 50 nonzeros a row: variates on demand, O(nnz P) per row; zeros of both rows still
    count (they share bin -1), so k depends on the union of the supports only through |u_i - v_i|."""
    d, grids, n = 2**30, 2048, 30
    rng = np.random.default_rng(5)
    rows_u, rows_v, K = [], [], []
    for _ in range(n):
        support = np.sort(rng.choice(d, 50, replace=False))
        u = rng.standard_normal(50)
        v = np.where(rng.random(50) < 0.96, u + rng.uniform(0, 0.1) * rng.standard_normal(50), 0.0)
        rows_u.append((support, u))
        rows_v.append((support, v))
        K.append(np.exp(-0.5 * np.abs(u - v).sum()))

    def csr(rows):
        indptr = np.cumsum([0] + [len(s) for s, _ in rows])
        return sp.csr_matrix((np.concatenate([x for _, x in rows]), np.concatenate([s for s, _ in rows]), indptr),
                             shape=(n, d))

    m = binning(d, grids)
    F = (m.hash(csr(rows_u)) == m.hash(csr(rows_v))).mean(axis=1)
    K = np.array(K)
    assert 0.005 < K.min() and K.max() < 0.98 and K.max() - K.min() > 0.4
    assert np.abs((F - K) / binomial_sd(K, grids)).max() <= Z_MAX


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_codes_do_not_depend_on_the_batch(pairs, layout):
    X = pairs[0] if layout == "dense" else sp.csr_matrix(pairs[0])
    m = binning(DIM, 256)
    everything = m.hash(X)
    for r in range(0, X.shape[0], 9):
        np.testing.assert_array_equal(m.hash(X[r:r + 1]), everything[r:r + 1])
    rows = np.random.default_rng(6).choice(X.shape[0], 37, replace=False)
    np.testing.assert_array_equal(m.hash(X[rows]), everything[rows])  # the parallel path, random order


def test_extreme_values_hash_without_overflow():
    m = binning(3, 64)
    X = np.array([[1e300, -1e300, 0.0], [1e-300, 5e-324, -0.0], [1e300, -1e300, 1.0]])
    codes = m.hash(X)
    assert codes.min() >= 0
    np.testing.assert_array_equal(codes[1], m.hash(np.zeros((1, 3)))[0])  # tiny values: the zero bin
    np.testing.assert_array_equal(m.hash(X[:1]), codes[:1])


# ---------------------------------------------------------------------------------------
# (c) one-hot features and LSH bands
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 4, 8])
def test_one_hot_features_are_the_low_bits_of_the_codes(pairs, bits):
    U, V = pairs[0][:30], pairs[1][:30]
    grids = 1024  # a power of 4: scale^2 = 2^-10 exactly, so the float32 CSR product is exact
    m = binning(DIM, grids, bits=bits)
    fu, fv = m.transform(U), m.transform(V)
    assert fu.dim == m.output_dim == grids << bits and fu.scale == 1 / np.sqrt(grids)
    block_start = np.arange(grids) << bits
    np.testing.assert_array_equal(fu.indices - block_start, m.hash(U) & ((1 << bits) - 1))
    low_u, low_v = m.hash(U) & ((1 << bits) - 1), m.hash(V) & ((1 << bits) - 1)
    expected = (low_u[:, None, :] == low_v[None, :, :]).mean(axis=2)
    np.testing.assert_array_equal((fu.to_csr() @ fv.to_csr().T).toarray(), expected)  
    assert m.describe()["features"] == "one_hot" and m.describe()["has_hash"]


@pytest.mark.parametrize("rows", [2, 8])
def test_band_collision_rate_is_the_kernel_to_the_r(pairs, dense_map, rows):
    """Bands of r grids collide iff all r codes match: probability k^r, independently across bands."""
    U, V = pairs
    n_bands = P // rows
    equal = (dense_map.hash(U) == dense_map.hash(V)).reshape(len(U), n_bands, rows)
    assert_binomial_family(equal.all(axis=2), laplacian_pairs(U, V, 0.5) ** rows, f"bands of {rows}")
    keys_u, keys_v = band_keys(dense_map.hash(U[:5]), 64), band_keys(dense_map.hash(V[:5]), 64)
    assert keys_u.shape == (5, 64) and keys_u.dtype.kind == "U"   # an (n, bands) array
    np.testing.assert_array_equal(keys_u[0], keys_v[0])  # the identical pair shares every band key


# ---------------------------------------------------------------------------------------
# (d) speed: compiled, O(nnz * P), no Python loop over rows or grids
# ---------------------------------------------------------------------------------------

def test_hashing_speed_is_that_of_a_compiled_loop():
    """Measured here: ~300 M (nonzero, grid) terms/s with variates on demand (2 cores), ~10x that from the
    table. Asked: 20 M/s, 15x below, so a loaded machine passes; a Python loop over rows or grids would do
    ~1-5 M/s. Sparse rows cost their nonzeros only: 100x wider rows of equal nnz cost about the same."""
    rng = np.random.default_rng(0)
    narrow = sp.random(2000, 1000, density=0.01, random_state=1, format="csr")
    wide = sp.csr_matrix((narrow.data, narrow.indices * 100, narrow.indptr), shape=(2000, 100_000))
    timings = {}
    for name, X in (("narrow", narrow), ("wide", wide)):
        m = binning(X.shape[1], 256, table_budget_bytes=0)
        m.hash(X[:10])  # compile (cached across runs) and warm up
        start = time.perf_counter()
        m.hash(X)
        timings[name] = time.perf_counter() - start
    rate = narrow.nnz * 256 / timings["narrow"]
    print(f"binning hash: {rate / 1e6:.0f} M terms/s on demand, "
          f"wide/narrow time {timings['wide'] / timings['narrow']:.2f}")
    assert rate > 20e6
    assert timings["wide"] < 3 * timings["narrow"] + 0.05
    dense = rng.standard_normal((1000, 64))
    m = binning(64, 1024).materialize()
    m.hash(dense[:10])
    start = time.perf_counter()
    m.hash(dense)
    assert dense.size * 1024 / (time.perf_counter() - start) > 20e6


# ---------------------------------------------------------------------------------------
# (e) spec, memory, service
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, field", [
    ({"gamma": 0}, "params.gamma"), ({"gamma": -1.0}, "params.gamma"), ({"gamma": float("inf")}, "params.gamma"),
    ({"bits": 0}, "params.bits"), ({"bits": 25}, "params.bits"), ({"kernel": "gaussian"}, "params.kernel"),
])
def test_bad_params_are_refused_naming_the_field(params, field):
    with pytest.raises(SpecError) as info:
        binning(4, 8, **params)
    assert info.value.field == field


def test_defaults_and_output_dim():
    spec = resolve_spec({"method": "binning", "input_dim": 4, "n_components": 16})
    assert spec.params == {"gamma": 1.0, "bits": 8}
    m = create_map(spec)
    assert m.output_dim == 16 << 8 and create_map(m.describe()).spec.id == m.spec.id


def test_memory_is_reported():
    m = binning(50, 1024)
    planned = m.planned_nbytes
    assert m.uses_table and m.nbytes < planned
    assert m.materialize().nbytes == planned == 50 * 1024 * 16 + 2 * 1024 * 8
    huge = binning(2**30, 1024)
    assert huge.materialize().nbytes == huge.planned_nbytes == 2 * 1024 * 8


def test_service_hashes_with_bands_and_transforms(embedded_server, pairs):
    U, V = pairs
    request = {"method": "binning", "input_dim": DIM, "n_components": 64, "seed": 9, "params": {"gamma": 0.5}}
    local = create_map(request)
    with embedded_server.client() as client:
        spec = client.post("/v1/maps", json=request).json()
        assert spec == local.describe() and spec["features"] == "one_hot" and spec["has_hash"]
        hashed = client.post(f"/v1/maps/{spec['id']}/hash", json={"vectors": U[:4].tolist(), "bands": 8}).json()
        np.testing.assert_array_equal(hashed["codes"], local.hash(U[:4]))
        assert hashed["band_keys"] == band_keys(local.hash(U[:4]), 8).tolist()
        sparse = [{"indices": np.flatnonzero(row).tolist(), "values": row[row != 0].tolist()} for row in U[:4]]
        assert client.post(f"/v1/maps/{spec['id']}/hash", json={"sparse_vectors": sparse}).json()["codes"] == \
            hashed["codes"]
        features = client.post(f"/v1/maps/{spec['id']}/transform", json={"vectors": U[:4].tolist()}).json()
        np.testing.assert_array_equal(features["indices"], local.transform(U[:4]).indices)
        kernel = client.post(f"/v1/maps/{spec['id']}/kernel", json={"x": U[:3].tolist(), "y": V[:3].tolist()}).json()
        np.testing.assert_allclose(kernel["exact"], local.exact_kernel(U[:3], V[:3]), rtol=1e-12)
        np.testing.assert_array_equal(kernel["estimate"], local.kernel(U[:3], V[:3]))


# ---------------------------------------------------------------------------------------
# (f) golden vectors
# ---------------------------------------------------------------------------------------

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "binning.json").read_text())
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_golden_vectors(name):
    case = GOLDEN["cases"][name]
    stored, expected = case["spec"], case["expected"]
    assert create_map(case["request"]).describe() == stored
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    document = case["input"]
    X = sp.csr_matrix((document["data"], document["indices"], document["indptr"]),
                      shape=(len(document["indptr"]) - 1, m.spec.input_dim))
    assert m.hash(X).tolist() == expected["hash"]  # discrete codes: exactly
    features = m.transform(X)
    assert features.indices.tolist() == expected["indices"]
    assert (features.scale, features.dim) == (expected["scale"], expected["dim"])
    if expected["exact_kernel"] is not None:
        np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12)
        inverse_pitch, shift = m.grid_constants()
        np.testing.assert_allclose(inverse_pitch[:2], expected["inverse_pitch_head"], rtol=1e-12)
        np.testing.assert_allclose(shift[:2], expected["shift_head"], rtol=1e-12)
