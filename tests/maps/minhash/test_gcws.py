"""GCWS (generalized consistent weighted sampling; docs/methods/minhash.md, "GCWS") against its exact kernel.

Statistics: for each sample j the full code (i*, t*) of u and v agree with probability exactly GMM(u, v)
(Theorem 1), independently across samples, so the match fraction over k samples is Binomial(k, G)/k with
standard deviation sqrt(G (1 - G) / k). Every per-pair check allows 4 of those (floored at 1/k so that pairs
with G near 0 or 1, whose binomial law is discrete and skewed, get at least 4 counts of slack): with 100
pairs per family the chance that a correct implementation trips one check is about 100 * 6e-5 < 1%. All
seeds are fixed, so the outcome is deterministic. Two family-wide checks catch what a per-pair 4 sd band
is too wide for: a common bias (the standardised sum of all deviations) and correlated samples (the mean
squared z-score, which is chi-square(1) per pair, must stay within 4 of its standard errors of 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from featurehash.maps.minhash import _gcws_kernels

MIXED_GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "gcws_mixed_bits.json").read_text())

K = 4096
N_PAIRS = 100
DENSE_DIM = 40
SPARSE_DIM = 2000
Z_MAX = 4.0


def gcws(input_dim: int, n_components: int = K, seed: int = 7, *, table_budget_bytes: int | None = None,
         **params):
    spec = {"method": "gcws", "input_dim": input_dim, "n_components": n_components, "seed": seed,
            "params": {"power": 1.0, "bits": 8, "zero_bit": False, **params}}
    options = {} if table_budget_bytes is None else {"table_budget_bytes": table_budget_bytes}
    return create_map(spec, **options)


# ---------------------------------------------------------------- reference kernel and statistics


def gmm_reference(u, v, power: float = 1.0) -> float:
    """GMM of two 1-D vectors straight from the definition (independent of app/featurehash/maps/kernels.py)."""
    u_tilde = np.concatenate([np.maximum(u, 0), np.maximum(-u, 0)]) ** power
    v_tilde = np.concatenate([np.maximum(v, 0), np.maximum(-v, 0)]) ** power
    return np.minimum(u_tilde, v_tilde).sum() / np.maximum(u_tilde, v_tilde).sum()


def pair_gmm(U, V, power: float = 1.0) -> np.ndarray:
    U = U.toarray() if sp.issparse(U) else U
    V = V.toarray() if sp.issparse(V) else V
    return np.array([gmm_reference(u, v, power) for u, v in zip(U, V)])


def pair_match(codes_u: np.ndarray, codes_v: np.ndarray) -> np.ndarray:
    """Fraction of samples where row i of codes_u equals row i of codes_v."""
    return (codes_u == codes_v).mean(axis=1)


def binomial_sd(p, trials: int) -> np.ndarray:
    return np.maximum(np.sqrt(p * (1 - p) / trials), 1.0 / trials)


def assert_binomial_family(fraction, p, trials: int, what: str) -> None:
    """Every pair within Z_MAX sd of p; no common bias; no overdispersion (see module docstring)."""
    fraction, p = np.asarray(fraction), np.asarray(p)
    z = (fraction - p) / binomial_sd(p, trials)
    worst = int(np.argmax(np.abs(z)))
    assert np.abs(z).max() <= Z_MAX, (
        f"{what}: pair {worst} has match fraction {fraction[worst]:.5f} vs exact {p[worst]:.5f} ({z[worst]:+.2f} sd)")
    variance = p * (1 - p) * trials
    bias_z = (fraction - p).sum() * trials / np.sqrt(variance.sum())
    assert abs(bias_z) <= Z_MAX, f"{what}: common bias of {bias_z:+.2f} sd over {p.size} pairs"
    inner = (p > 0.01) & (p < 0.99)  # the normal approximation of the binomial holds here
    mean_square = np.mean(((fraction - p)[inner] * trials) ** 2 / variance[inner])
    assert mean_square <= 1 + Z_MAX * np.sqrt(2 / inner.sum()), f"{what}: overdispersed, mean z^2 = {mean_square:.3f}"


# ---------------------------------------------------------------- test data


SCALE_FACTORS = (1.02, 1.25, 2.0, 5.0, 30.0, 0.5)
PERTURBED_KINDS = ("noise on support", "noise everywhere", "multiplicative noise", "partial overlap", "independent")


def dense_kinds(n: int = N_PAIRS) -> list[str]:
    """How pair i of `dense_pairs` is made."""
    fixed = ["identical", "negated", "disjoint"] + ["rescaled"] * len(SCALE_FACTORS)
    return fixed + [PERTURBED_KINDS[i % 5] for i in range(n - len(fixed))]


def dense_pairs(seed: int = 11, n: int = N_PAIRS, d: int = DENSE_DIM) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (U[i], V[i]) with mixed signs spanning GMM from 0 to 1, made as `dense_kinds` says.

    Fixed edge pairs first (identical: GMM 1; negated or disjoint supports: GMM 0; v = c u: GMM
    min(c, 1/c)), then perturbed copies: additive noise on the same sparsity pattern or everywhere,
    multiplicative noise, partial support overlap, and independent vectors. Overall scales span
    e^-4..e^4 so t* takes both signs.
    """
    rng = np.random.default_rng(seed)
    U, V = np.zeros((n, d)), np.zeros((n, d))
    scales = iter(SCALE_FACTORS)
    for i, kind in enumerate(dense_kinds(n)):
        mask = rng.random(d) < rng.uniform(0.2, 1.0)
        mask[rng.integers(d)] = True
        u = rng.standard_normal(d) * mask * np.exp(rng.uniform(-4, 4))
        scale = np.abs(u[mask]).mean()
        level = np.exp(rng.uniform(np.log(1e-3), np.log(3.0)))
        if kind == "identical":
            v = u
        elif kind == "negated":
            v = -u
        elif kind == "disjoint":
            u, v = u * (np.arange(d) < d // 2), rng.standard_normal(d) * (np.arange(d) >= d // 2)
            u[0] = u[0] or 1.0
        elif kind == "rescaled":
            v = next(scales) * u
        elif kind == "noise on support":
            v = u + level * scale * rng.standard_normal(d) * mask
        elif kind == "noise everywhere":
            v = u + level * scale * rng.standard_normal(d)
        elif kind == "multiplicative noise":
            v = u * np.exp(level * rng.standard_normal(d))
        elif kind == "partial overlap":
            keep = rng.random(d) < rng.uniform(0.3, 1.0)
            extra = (rng.random(d) < 0.3) & ~mask
            v = u * keep + extra * scale * rng.standard_normal(d) + level * scale * rng.standard_normal(d) * mask
        else:
            v = rng.standard_normal(d) * (rng.random(d) < 0.6) * scale
        if not v.any():
            v[rng.integers(d)] = scale
        U[i], V[i] = u, v
    return U, V


def sparse_pairs(seed: int = 12, n: int = N_PAIRS, d: int = SPARSE_DIM) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """CSR pairs, about 2-5% dense, mixed signs: v shares part of u's support with perturbed values
    (some signs flipped) plus entries of its own; a few identical, negated and independent pairs."""
    rng = np.random.default_rng(seed)
    U, V = np.zeros((n, d)), np.zeros((n, d))
    for i in range(n):
        nnz = int(rng.uniform(0.02, 0.05) * d)
        support = rng.choice(d, nnz, replace=False)
        scale = np.exp(rng.uniform(-3, 3))
        U[i, support] = rng.standard_normal(nnz) * scale
        if i == 0:
            V[i] = U[i]
        elif i == 1:
            V[i] = -U[i]
        elif i % 10 == 9:  # independent sparsity patterns
            other = rng.choice(d, int(rng.uniform(0.02, 0.05) * d), replace=False)
            V[i, other] = rng.standard_normal(other.size) * scale
        else:
            distance = rng.uniform(0, 1)  # drives every kind of difference at once
            kept = support[rng.random(nnz) < 1 - 0.6 * distance]
            level = np.exp(rng.uniform(np.log(1e-3), np.log(1e-3 + 2 * distance)))
            V[i, kept] = U[i, kept] * (1 + level * rng.standard_normal(kept.size))
            flipped = kept[rng.random(kept.size) < 0.2 * distance]
            V[i, flipped] *= -1
            own = rng.choice(d, int(nnz * 0.5 * distance), replace=False)
            own = own[U[i, own] == 0]
            V[i, own] = rng.standard_normal(own.size) * scale
            if not V[i].any():
                V[i, support[0]] = U[i, support[0]]
    return sp.csr_matrix(U), sp.csr_matrix(V)


@pytest.fixture(scope="module")
def dense_data():
    return dense_pairs()


@pytest.fixture(scope="module")
def sparse_data():
    return sparse_pairs()


@pytest.fixture(scope="module")
def dense_map():
    return gcws(DENSE_DIM)


# ---------------------------------------------------------------- 1. full codes estimate GMM / pGMM


def test_test_data_spans_the_gmm_range(dense_data, sparse_data):
    for U, V in (dense_data, sparse_data):
        G = pair_gmm(U, V)
        assert U.min() < 0 < U.max() and V.min() < 0 < V.max()  # mixed signs
        assert G.min() == 0 and G.max() == 1
        assert ((G > 0.05) & (G < 0.3)).sum() >= 10
        assert ((G > 0.3) & (G < 0.7)).sum() >= 10
        assert ((G > 0.7) & (G < 0.98)).sum() >= 10
    sparse_density = sparse_data[0].getnnz(axis=1) / SPARSE_DIM
    assert 0.02 <= sparse_density.min() and sparse_density.max() < 0.05


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
def test_dense_match_fraction_estimates_gmm(dense_data, power):
    U, V = dense_data
    m = gcws(DENSE_DIM, power=power)
    assert m.uses_table
    G = pair_gmm(U, V, power)
    F = pair_match(m.hash(U), m.hash(V))
    assert_binomial_family(F, G, K, f"dense, power {power}")
    assert F[G == 1].min() == 1 and F[G == 0].max() == 0  # exact at the ends, not just within 4 sd


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
def test_sparse_match_fraction_estimates_gmm(sparse_data, power):
    U, V = sparse_data
    m = gcws(SPARSE_DIM, power=power, table_budget_bytes=0)  # on-demand variates: the large-index path
    assert not m.uses_table
    G = pair_gmm(U, V, power)
    F = pair_match(m.hash(U), m.hash(V))
    assert_binomial_family(F, G, K, f"sparse, power {power}")
    assert F[G == 1].min() == 1 and F[G == 0].max() == 0


def test_huge_index_space_estimates_gmm():
    """input_dim 2^30: no table fits, variates come on demand, cost is nnz * k only."""
    d, k, n = 2**30, 1024, 20
    rng = np.random.default_rng(5)
    m = gcws(d, k)
    assert not m.uses_table
    rows_u, rows_v, G = [], [], []
    for _ in range(n):
        support = rng.choice(d, 60, replace=False)
        u = rng.standard_normal(60)
        v = np.where(rng.random(60) < 0.7, u * (1 + rng.uniform(0, 1) * rng.standard_normal(60)), 0.0)
        v[0] = v[0] or 1.0
        rows_u.append((support, u))
        rows_v.append((support, v))
        G.append(gmm_reference(u, v))  # GMM only sees the nonzeros

    def csr(rows):
        indptr = np.cumsum([0] + [len(s) for s, _ in rows])
        return sp.csr_matrix((np.concatenate([x for _, x in rows]), np.concatenate([s for s, _ in rows]), indptr),
                             shape=(n, d))

    F = pair_match(m.hash(csr(rows_u)), m.hash(csr(rows_v)))
    G = np.array(G)
    z = (F - G) / binomial_sd(G, k)
    assert np.abs(z).max() <= Z_MAX, z


# ---------------------------------------------------------------- 2. 0-bit


def test_zero_bit_codes_are_i_star_and_approximate_gmm(dense_data, sparse_data):
    """0-bit keeps i* only, so it matches whenever the full code does (F0 >= F for every pair).

    Its collision probability Pr[i*_u = i*_v] exceeds GMM by Pr[i* equal, t* different], which has no
    closed form; Li (KDD 2015) finds it small empirically. Bound: the mean absolute deviation from GMM
    over the pairs may be what binomial noise alone gives, E|F - G| = sqrt(2/pi) * sd averaged over the
    pairs (about 0.004-0.005 here), plus 0.01 of 0-bit bias, i.e. 1.3 binomial sd at k = 4096 and
    G = 1/2: small beside the noise a user of k samples lives with, far below what a broken i* gives.

    The approximation assumes the two vectors differ by noise, not by scale: i* hardly moves when a
    vector or its entries are multiplied by large factors, while GMM drops (v = 30 u: GMM 0.033, 0-bit
    match fraction 0.40). So the bound covers the additive kinds of pair and the sparse family;
    rescaled and multiplicative-noise pairs are held only to F0 >= F.
    """
    kinds = np.array(dense_kinds())
    additive = ~np.isin(kinds, ["rescaled", "multiplicative noise"])
    U, V = dense_data
    families = {
        "dense": (gcws(DENSE_DIM), gcws(DENSE_DIM, zero_bit=True), U, V, additive),
        "sparse": (gcws(SPARSE_DIM, 1024, table_budget_bytes=0),
                   gcws(SPARSE_DIM, 1024, table_budget_bytes=0, zero_bit=True), *sparse_data, slice(None)),
    }
    for name, (full, zero_bit, U, V, bounded) in families.items():
        k = full.spec.n_components
        np.testing.assert_array_equal(zero_bit.hash(U), full.samples(U)[0])
        G = pair_gmm(U, V)
        F = pair_match(full.hash(U), full.hash(V))
        F0 = pair_match(zero_bit.hash(U), zero_bit.hash(V))
        assert np.all(F0 >= F), name
        assert F0[G == 0].max() == 0 and F0[G == 1].min() == 1, name
        np.testing.assert_array_equal(zero_bit.kernel(U[:10], V[:10]).diagonal(), F0[:10])
        G, F0 = G[bounded], F0[bounded]
        noise = np.mean(np.sqrt(2 / np.pi) * np.sqrt(G * (1 - G) / k))
        deviation = np.abs(F0 - G).mean()
        assert deviation <= noise + 0.01, (name, deviation, noise)


# ---------------------------------------------------------------- 3. b-bit linearisation


@pytest.mark.parametrize("bits", [1, 4, 8])
def test_index_b_bit_features_are_the_low_bits_of_i_star(dense_data, bits):
    """bit_source "index" (specs stored before the parameter): the lowest bits of i* itself."""
    U, V = dense_data
    U, V = U[:40], V[:40]
    m = gcws(DENSE_DIM, bits=bits, bit_source="index")
    fu, fv = m.transform(U), m.transform(V)
    assert fu.dim == m.output_dim == K << bits
    assert fu.scale == 1 / np.sqrt(K)
    block_start = np.arange(K) << bits
    for f, X in ((fu, U), (fv, V)):
        assert f.indices.shape == (X.shape[0], K)
        assert np.all((f.indices >= block_start) & (f.indices < block_start + (1 << bits)))
        np.testing.assert_array_equal(f.indices - block_start, m.samples(X)[0] & ((1 << bits) - 1))

    low_u = m.samples(U)[0] & ((1 << bits) - 1)
    low_v = m.samples(V)[0] & ((1 << bits) - 1)
    expected = (low_u[:, None, :] == low_v[None, :, :]).mean(axis=2)  # all 40 x 40 pairs
    counted = (fu.indices[:, None, :] == fv.indices[None, :, :]).sum(axis=2) * fu.scale**2
    np.testing.assert_array_equal(counted, expected)
    gram = (fu.to_csr() @ fv.to_csr().T).toarray()
    np.testing.assert_array_equal(gram, expected)  # exact: k is a power of two, scale^2 = 2^-12
    assert fu.to_csr().shape == (U.shape[0], fu.dim) and np.all(fu.to_csr().getnnz(axis=1) == K)


@pytest.mark.parametrize("sampler, zero_bit", [("icws", False), ("icws", True), ("dart", False), ("dart", True)])
def test_mixed_b_bit_features_are_seeded_bits_of_the_codes(dense_data, sampler, zero_bit):
    """bit_source "mixed_code" (new requests): the low bits of a seeded mix of each sample's code, and
    the inner product of two rows' features is their b-bit match fraction."""
    U, V = dense_data[0][:40], dense_data[1][:40]
    for bits in (1, 4):
        m = gcws(DENSE_DIM, bits=bits, zero_bit=zero_bit, sampler=sampler)
        assert m.spec.params["bit_source"] == "mixed_code"
        fu, fv = m.transform(U), m.transform(V)
        block_start = np.arange(K) << bits
        mixed = _gcws_kernels.mixed_codes(m._bit_keys, m.hash(U)) & ((1 << bits) - 1)
        np.testing.assert_array_equal(fu.indices - block_start, mixed)
        expected = (fu.indices[:, None, :] == fv.indices[None, :, :]).mean(axis=2)
        np.testing.assert_array_equal((fu.to_csr() @ fv.to_csr().T).toarray(), expected)  # k = 2^12: exact


@pytest.mark.parametrize("sampler", ["icws", "dart"])
@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_mixed_b_bit_match_fraction_is_gmm_plus_chance(dense_data, sampler, bits):
    """Equal codes give equal features; unequal codes agree in b uniform bits with probability 2^-b, so
    Pr[b-bit match] = GMM + (1 - GMM) 2^-b (Li & Koenig's b-bit relation), independently per sample."""
    U, V = dense_data
    m = gcws(DENSE_DIM, bits=bits, sampler=sampler)
    fu, fv = m.transform(U), m.transform(V)
    fraction = pair_match(fu.indices, fv.indices)
    G = pair_gmm(U, V)
    assert_binomial_family(fraction, G + (1 - G) * 2.0**-bits, K, f"{sampler} b={bits}")
    # Given the codes, the chance agreements of unequal codes are Binomial(#unequal, 2^-b) per pair.
    unequal = m.hash(U) != m.hash(V)
    chance = (unequal & (fu.indices == fv.indices)).sum(axis=1)
    trials, p = unequal.sum(axis=1), 2.0**-bits
    z = (chance - trials * p) / np.sqrt(np.maximum(trials * p * (1 - p), 1.0))
    assert np.abs(z).max() <= Z_MAX, (sampler, bits, z)
    common = (chance.sum() - trials.sum() * p) / np.sqrt(trials.sum() * p * (1 - p))
    assert abs(common) <= Z_MAX, (sampler, bits, common)


def test_mixed_one_bit_features_are_balanced_on_nonnegative_data(dense_data):
    """On nonnegative data the index bits waste the lowest bit (always 0: i* = 2i); mixed bits are fair."""
    X = np.abs(dense_data[0])
    legacy = gcws(DENSE_DIM, bits=1, bit_source="index").transform(X)
    assert np.all(legacy.indices % 2 == 0)
    ones = (gcws(DENSE_DIM, bits=1).transform(X).indices % 2).mean(axis=1)
    np.testing.assert_array_less(np.abs(ones - 0.5), Z_MAX * 0.5 / np.sqrt(K))


def test_stored_specs_keep_index_bits_and_new_requests_get_mixed_bits(dense_data):
    request = {"method": "gcws", "input_dim": DENSE_DIM, "n_components": 64, "seed": 3, "params": {"bits": 2}}
    legacy = resolve_spec({**request, "params": {"bits": 2, "bit_source": "index"}})
    assert "bit_source" not in legacy.params  # as every spec stored before the parameter
    stored = create_map(legacy.to_dict())      # a replica rebuilding a stored spec
    assert stored.spec.id == legacy.id and "bit_source" not in stored.spec.params
    X = dense_data[0][:5]
    np.testing.assert_array_equal(stored.transform(X).indices & 3, stored.samples(X)[0] & 3)
    new = create_map(request)
    assert new.spec.params["bit_source"] == "mixed_code" and new.spec.id != legacy.id
    assert create_map(new.describe()).spec.id == new.spec.id
    assert create_map(new.spec).spec.id == new.spec.id and create_map(legacy).spec.id == legacy.id
    np.testing.assert_array_equal(new.hash(X), stored.hash(X))  # codes (and LSH keys) do not change


@pytest.mark.parametrize("name", list(MIXED_GOLDEN["cases"]))
def test_mixed_bits_golden(name):
    case = MIXED_GOLDEN["cases"][name]
    stored = case["spec"]
    assert create_map(case["request"]).spec.id == stored["id"]
    m = create_map({key: stored[key] for key in ("method", "input_dim", "n_components", "seed", "params", "id")})
    X = np.array(case["input"], dtype=np.float64)
    assert m.hash(X).tolist() == case["expected"]["hash"]
    assert m.transform(X).indices.tolist() == case["expected"]["indices"]


def test_b_bit_match_fractions_are_nested(dense_data):
    """low 8 bits equal => low 4 bits equal => low bit equal, and i* equal => all of them."""
    U, V = dense_data
    m = gcws(DENSE_DIM)
    (iu, tu), (iv, tv) = m.samples(U), m.samples(V)
    fractions = [((iu == iv) & (tu == tv)).mean(axis=1), (iu == iv).mean(axis=1)]
    for bits in (8, 4, 1):
        mask = (1 << bits) - 1
        fractions.append(((iu & mask) == (iv & mask)).mean(axis=1))
    assert np.all(np.diff(np.array(fractions), axis=0) >= 0)


def test_b_bit_scale_for_k_not_a_power_of_two(dense_data):
    U, V = dense_data
    k = 1000
    m = gcws(DENSE_DIM, k, bits=4)
    fu, fv = m.transform(U[:20]), m.transform(V[:20])
    expected = (fu.indices[:, None, :] == fv.indices[None, :, :]).mean(axis=2)
    # to_csr holds float32 values and the product sums k of them in float32: relative error <= k * eps32
    rtol = k * np.finfo(np.float32).eps
    np.testing.assert_allclose((fu.to_csr() @ fv.to_csr().T).toarray(), expected, rtol=rtol, atol=0)
    np.testing.assert_allclose((fu.to_csr() @ fu.to_csr().T).diagonal(), 1.0, rtol=rtol)


# ---------------------------------------------------------------- 4. input layouts, batching, table


def scrambled_csr(X: np.ndarray, rng: np.random.Generator) -> sp.csr_matrix:
    """The CSR of X with each row's entries in random order, explicit zeros mixed in, and some entries
    split into two duplicates x/2 + x/2 (exact in floating point)."""
    data, indices, indptr = [], [], [0]
    for row in X:
        cols = np.flatnonzero(row)
        entries = [(c, row[c]) for c in cols]
        zero_cols = rng.choice(np.setdiff1d(np.arange(X.shape[1]), cols), min(3, X.shape[1] - cols.size),
                               replace=False)
        entries += [(c, 0.0) for c in zero_cols]
        for c in cols[rng.random(cols.size) < 0.3]:
            entries = [(cc, x / 2 if cc == c else x) for cc, x in entries] + [(c, row[c] / 2)]
        order = rng.permutation(len(entries))
        data += [entries[o][1] for o in order]
        indices += [entries[o][0] for o in order]
        indptr.append(len(data))
    return sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=X.shape)


def test_dense_and_sparse_layouts_give_identical_codes(dense_data):
    U, _ = dense_data
    m = gcws(DENSE_DIM, 512)
    expected = m.hash(U)
    rng = np.random.default_rng(3)
    scrambled = scrambled_csr(U, rng)
    assert not scrambled.has_sorted_indices and (scrambled.data == 0).any()
    assert scrambled.nnz > sp.csr_matrix(U).nnz + U.shape[0]  # zeros and duplicates really are there
    snapshot = (scrambled.data.copy(), scrambled.indices.copy(), scrambled.indptr.copy())
    layouts = {
        "csr": sp.csr_matrix(U),
        "csr unsorted + explicit zeros + duplicates": scrambled,
        "csc": sp.csc_matrix(U),
        "coo": sp.coo_matrix(U),
        "csr_array": sp.csr_array(U),
        "fortran-ordered dense": np.asfortranarray(U),
        "list of lists": U.tolist(),
    }
    for name, X in layouts.items():
        np.testing.assert_array_equal(m.hash(X), expected, err_msg=name)
    for before, after in zip(snapshot, (scrambled.data, scrambled.indices, scrambled.indptr)):
        np.testing.assert_array_equal(before, after)  # the caller's matrix was not reordered in place


def test_float32_and_integer_inputs_hash_their_values():
    rng = np.random.default_rng(4)
    X32 = (rng.standard_normal((30, DENSE_DIM)) * (rng.random((30, DENSE_DIM)) < 0.5)).astype(np.float32)
    X32[:, 0] = 1.5
    m = gcws(DENSE_DIM, 256)
    np.testing.assert_array_equal(m.hash(X32), m.hash(X32.astype(np.float64)))
    np.testing.assert_array_equal(m.hash(sp.csr_matrix(X32)), m.hash(X32.astype(np.float64)))
    Xint = rng.integers(-3, 4, size=(30, DENSE_DIM))
    Xint[:, 0] = 1
    np.testing.assert_array_equal(m.hash(Xint), m.hash(Xint.astype(np.float64)))


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_codes_do_not_depend_on_the_batch(dense_data, sparse_data, layout):
    X = dense_data[0] if layout == "dense" else sparse_data[0]
    m = gcws(X.shape[1], 256)
    everything = m.hash(X)
    for r in range(X.shape[0]):  # row by row
        np.testing.assert_array_equal(m.hash(X[r:r + 1]), everything[r:r + 1])
    rng = np.random.default_rng(6)
    for size in (2, 13, 50):
        rows = rng.choice(X.shape[0], size, replace=False)  # random subset in random order
        np.testing.assert_array_equal(m.hash(X[rows]), everything[rows])


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_table_and_on_demand_variates_give_identical_codes(dense_data, sparse_data, power):
    for X in (dense_data[0], dense_data[1], sparse_data[0][:30]):
        table = gcws(X.shape[1], 512, power=power)
        on_demand = gcws(X.shape[1], 512, power=power, table_budget_bytes=0)
        assert table.uses_table and not on_demand.uses_table
        for a, b in zip(table.samples(X), on_demand.samples(X)):
            np.testing.assert_array_equal(a, b)


def test_variates_depend_only_on_seed_sample_and_coordinate(dense_data):
    """The randomness is a function of (seed, j, i): a longer map extends a shorter one, and a vector
    hashes the same in a wider input space; another seed gives other codes."""
    U, _ = dense_data
    short, long = gcws(DENSE_DIM, 100), gcws(DENSE_DIM, 300)
    np.testing.assert_array_equal(long.hash(U)[:, :100], short.hash(U))
    Uc = sp.csr_matrix(U)
    wide = gcws(2**20, 100)
    np.testing.assert_array_equal(wide.hash(sp.csr_matrix((Uc.data, Uc.indices, Uc.indptr), shape=(U.shape[0], 2**20))),
                                  short.hash(U))
    assert (gcws(DENSE_DIM, 100, seed=8).hash(U) != short.hash(U)).mean() > 0.5


# ---------------------------------------------------------------- 5. errors, code layout, kernel API


@pytest.mark.parametrize("call", ["hash", "samples", "transform", "kernel"])
def test_all_zero_rows_are_rejected(call):
    m = gcws(5, 16)
    X = np.array([[1.0, 0, 0, 0, -2.0], [0, 0, 0, 0, 0], [0, 3.0, 0, 0, 0]])
    cancelling = sp.csr_matrix((np.array([1.0, 2.0, -2.0, 4.0]), np.array([0, 3, 3, 1]), np.array([0, 1, 3, 4])),
                               shape=(3, 5))  # row 1 is 2 + (-2) at the same column
    cases = {
        "dense zero row": X,
        "csr empty row": sp.csr_matrix(X),
        "csr explicit zeros only": sp.csr_matrix((np.array([1.0, 0.0, 0.0, 3.0]), np.array([0, 2, 4, 1]),
                                                  np.array([0, 1, 3, 4])), shape=(3, 5)),
        "csr duplicates cancelling": cancelling,
    }
    for name, bad in cases.items():
        with pytest.raises(InputError) as info:
            getattr(m, call)(bad)
        assert info.value.field == ("x" if call == "kernel" else "vectors"), name
        assert "row(s) 1" in info.value.message, (name, info.value.message)


def test_codes_are_nonnegative_and_encode_exactly_i_star_and_t_star(dense_data, sparse_data):
    m_dense, m_sparse = gcws(DENSE_DIM, 512), gcws(SPARSE_DIM, 512, table_budget_bytes=0)
    for m, X in ((m_dense, np.vstack(dense_data)), (m_sparse, sp.vstack(sparse_data, format="csr"))):
        codes = m.hash(X)
        i_star, t_star = m.samples(X)
        assert codes.dtype == np.int64 and codes.min() >= 0
        assert t_star.min() < 0 < t_star.max()  # the zigzag of both signs is exercised
        assert i_star.min() >= 0 and i_star.max() < 2 * X.shape[1]
        # decode: high 32 bits are i*, low 32 bits the zigzag of t*
        low = codes & 0xFFFFFFFF
        np.testing.assert_array_equal(codes >> 32, i_star)
        np.testing.assert_array_equal((low >> 1) ^ -(low & 1), t_star)
        # equal codes iff equal (i*, t*), on random pairs of rows at the same sample: half of them a row
        # and its partner (u and v of one pair), which often share i*, so that t* decides
        rng = np.random.default_rng(9)
        n = X.shape[0]
        a, j = rng.integers(n, size=20000), rng.integers(512, size=20000)
        b = np.where(rng.random(20000) < 0.5, (a + n // 2) % n, rng.integers(n, size=20000))
        same_i = i_star[a, j] == i_star[b, j]
        assert same_i.sum() > 2000 and (same_i & (t_star[a, j] != t_star[b, j])).sum() > 10
        np.testing.assert_array_equal(codes[a, j] == codes[b, j],
                                      same_i & (t_star[a, j] == t_star[b, j]))


def test_i_star_is_the_signed_coordinate():
    """i* = 2c for a positive entry at column c and 2c + 1 for a negative one."""
    m = gcws(6, 64)
    i_star, _ = m.samples(np.array([[0, 0, 0, 2.5, 0, 0], [0, -0.1, 0, 0, 0, 0]]))
    assert np.all(i_star[0] == 6) and np.all(i_star[1] == 3)


def test_kernel_is_match_fraction_and_consistent_with_exact_kernel(dense_data, sparse_data):
    U, V = dense_data
    m = gcws(DENSE_DIM)
    estimate = m.kernel(U[:20], V[:20])
    codes_u, codes_v = m.hash(U[:20]), m.hash(V[:20])
    np.testing.assert_array_equal(estimate, (codes_u[:, None, :] == codes_v[None, :, :]).mean(axis=2))
    exact = m.exact_kernel(U[:20], V[:20])
    reference = np.array([[gmm_reference(u, v) for v in V[:20]] for u in U[:20]])
    np.testing.assert_allclose(exact, reference, rtol=1e-12, atol=1e-15)
    z = (estimate - exact) / binomial_sd(exact, K)
    assert np.abs(z).max() <= Z_MAX  # 400 entries: < 3% chance of a false alarm
    own = m.kernel(U[:20])
    np.testing.assert_array_equal(own, own.T)
    assert np.all(own.diagonal() == 1)
    np.testing.assert_allclose(m.exact_kernel(U[:20]).diagonal(), 1.0, rtol=1e-14)

    Us, Vs = sparse_data
    ms = gcws(SPARSE_DIM, 512, table_budget_bytes=0)
    np.testing.assert_array_equal(ms.kernel(Us[:10], Vs[:10]), ms.kernel(Us[:10].toarray(), Vs[:10]))
    np.testing.assert_allclose(ms.exact_kernel(Us[:10], Vs[:10]).diagonal(), pair_gmm(Us[:10], Vs[:10]),
                               rtol=1e-12)
    for power in (0.5, 2.0):
        np.testing.assert_allclose(gcws(DENSE_DIM, 1, power=power).exact_kernel(U[:10], V[:10]).diagonal(),
                                   pair_gmm(U[:10], V[:10], power), rtol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("X", [[[1e200, 1.0], [2e200, 1.0]], [[1e-200, 0.0], [2e-200, 0.0]]], ids=["big", "tiny"])
def test_exact_pgmm_is_scale_free(X):
    """pGMM is homogeneous of degree 0 (GMM(s u, s v) = GMM(u, v)), so at power 2 these pairs have the
    same kernel as [[1, *], [2, *]]: 1/4. The map's own estimate agrees within 4 sd."""
    m = gcws(2, power=2.0)
    X = np.array(X)
    assert abs(m.kernel(X)[0, 1] - 0.25) <= Z_MAX * binomial_sd(0.25, K)
    np.testing.assert_allclose(m.exact_kernel(X)[0, 1], 0.25, rtol=1e-9)


@pytest.mark.parametrize("params", [{"bits": 0}, {"bits": 25}, {"power": 0}, {"power": -1},
                                    {"power": float("nan")}, {"unknown": 1}])
def test_bad_params_are_refused(params):
    with pytest.raises(SpecError):
        gcws(4, 8, **params)


# ---------------------------------------------------------------- 6. LSH bands


@pytest.mark.parametrize("rows", [2, 4, 8])
def test_band_collision_rate_is_gmm_to_the_r(dense_data, dense_map, rows):
    """k samples cut into k/r disjoint bands of r: a band collides iff its r codes all match, with
    probability GMM^r, independently across bands (the samples are independent), so the collision
    fraction is Binomial(k/r, GMM^r)/(k/r), checked like the single samples above."""
    U, V = dense_data
    G = pair_gmm(U, V)
    n_bands = K // rows
    equal = (dense_map.hash(U) == dense_map.hash(V)).reshape(U.shape[0], n_bands, rows)
    collisions = equal.all(axis=2).mean(axis=1)
    assert_binomial_family(collisions, G**rows, n_bands, f"bands of {rows}")


def test_lsh_tables_find_near_duplicates(dense_data, dense_map):
    """Banded hash tables as a user builds them: for each pair, its v is a candidate for its u in some of
    the b bands iff a band collides; near duplicates (G >= 0.9) must be found with 16 bands of 8
    (miss probability (1 - 0.9^8)^16 < 1e-5), unrelated pairs (G <= 0.2) almost never (2.6e-6 a band)."""
    U, V = dense_data
    G = pair_gmm(U, V)
    codes_u, codes_v = dense_map.hash(U)[:, :128], dense_map.hash(V)[:, :128]
    tables = [dict() for _ in range(16)]
    for row, codes in enumerate(codes_v):
        for band, table in enumerate(tables):
            table.setdefault(codes[band * 8:(band + 1) * 8].tobytes(), set()).add(row)
    found = np.array([any(row in table.get(codes[band * 8:(band + 1) * 8].tobytes(), ())
                          for band, table in enumerate(tables)) for row, codes in enumerate(codes_u)])
    assert found[G >= 0.9].all()
    assert not found[G <= 0.2].any()
