"""featurehash.dask's similarity join and duplicate clusters against featurehash.dedup on the same rows.

Equality, not recall: the Dask join bands the same codes with the same (L, r), so it finds the same
candidates, and it scores them with the same pair kernel on the same rows (gcws power 1 here, where no
rescaling happens), so the pairs are the same and the similarities equal to float rounding (the sums
run over the same entries in the same order; 1e-12 relative leaves room for a CPU whose numpy reduces
a block of other shape in another order). Clusters: the same pairs give the same components and the
same greedy representatives, so labels (the lowest row of each cluster) are equal exactly.
Planted sets from tests/dedup_support.py: groups of perturbed copies plus unrelated rows, seeded.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="dask is an optional extra: pip install 'featurehash[dask]'")
pytest.importorskip("dask.dataframe", reason="the Dask join returns a dask DataFrame", exc_type=ImportError)
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

import featurehash.dask as fhd  # noqa: E402
from dedup_support import dense_planted, sparse_planted  # noqa: E402
from featurehash import create_map  # noqa: E402
from featurehash.dedup import duplicate_clusters, similarity_join  # noqa: E402
from featurehash.maps import InputError  # noqa: E402

SPARSE_GCWS = {"method": "gcws", "input_dim": 2000, "n_components": 128, "seed": 7}
DENSE_GCWS = {"method": "gcws", "input_dim": 24, "n_components": 128, "seed": 8}
BINNING = {"method": "binning", "input_dim": 6, "n_components": 128, "seed": 5, "params": {"gamma": 1.0}}
MINHASH = {"method": "minhash", "input_dim": 2000, "n_components": 128, "seed": 6}
RTOL = 1e-12


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        yield dask_client


def _binning_rows(n_groups: int, seed: int) -> np.ndarray:
    """Points with close copies (Laplacian kernel exp(-||x - y||_1) spread over (0, 1))."""
    rng = np.random.default_rng(seed)
    base = rng.random((n_groups, 6))
    copies = base[:, None, :] + rng.laplace(0.0, 1.0, (n_groups, 3, 6)) * rng.uniform(0.002, 0.08, (n_groups, 3, 1))
    X = np.concatenate([base, copies.reshape(-1, 6), rng.random((n_groups, 6))])
    return X[rng.permutation(X.shape[0])]


CASES = {   # name: (rows, spec, row chunk, threshold)
    "sparse-gcws": (lambda: sparse_planted(n_groups=100, group_size=4, n_background=200, dim=2000, nnz=30,
                                           seed=2), SPARSE_GCWS, 150, 0.5),
    "dense-gcws": (lambda: dense_planted(n_groups=80, group_size=4, n_background=100, dim=24, seed=1),
                   DENSE_GCWS, 130, 0.6),
    "dense-binning": (lambda: _binning_rows(100, seed=3), BINNING, 170, 0.7),
    "sparse-minhash": (lambda: sparse_planted(n_groups=100, group_size=4, n_background=200, dim=2000, nnz=30,
                                              seed=4), MINHASH, 150, 0.5),
}


@pytest.fixture(scope="module")
def cases():
    """Each case's rows, built once, as an array and a dask array of row blocks."""
    built = {}
    for name, (make, spec, chunk, threshold) in CASES.items():
        X = make()
        built[name] = X, da.from_array(X, chunks=(chunk, X.shape[1]), asarray=False), spec, threshold
    return built


def _assert_same_pairs(frame, expected):
    got = frame.compute().reset_index(drop=True)
    assert list(got.columns) == ["i", "j", "similarity"] and len(got) == len(expected) > 0
    assert got["i"].dtype == np.int64 and got["similarity"].dtype == np.float64
    np.testing.assert_array_equal(got["i"].to_numpy(), expected.i)
    np.testing.assert_array_equal(got["j"].to_numpy(), expected.j)
    np.testing.assert_allclose(got["similarity"].to_numpy(), expected.similarity, rtol=RTOL, atol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_self_join_equals_in_process(client, cases, name):
    X, dX, spec, threshold = cases[name]
    pairs = fhd.similarity_join(dX, spec, threshold)
    assert pairs.npartitions == dX.numblocks[0]   # one partition of pairs per row block: none holds them all
    _assert_same_pairs(pairs, similarity_join(X, create_map(spec), threshold))


@pytest.mark.parametrize("name", ["dense-binning", "sparse-gcws", "sparse-minhash"])
def test_two_collections_equal_in_process(client, cases, name):
    X, _, spec, threshold = cases[name]
    half = X.shape[0] // 2
    dX = da.from_array(X[:half], chunks=(90, X.shape[1]), asarray=False)
    dY = da.from_array(X[half:], chunks=(120, X.shape[1]), asarray=False)
    expected = similarity_join(X[:half], create_map(spec), threshold, Y=X[half:])
    _assert_same_pairs(fhd.similarity_join(dX, spec, threshold, Y=dY), expected)


@pytest.mark.parametrize(("name", "mode"), [("sparse-gcws", "components"), ("sparse-gcws", "representatives"),
                                            ("dense-binning", "components"), ("dense-gcws", "representatives")])
def test_clusters_equal_in_process(client, cases, name, mode):
    X, dX, spec, threshold = cases[name]
    expected = duplicate_clusters(X, create_map(spec), threshold, mode=mode)
    clusters = fhd.duplicate_clusters(dX, spec, threshold, mode=mode)
    labels = clusters.labels.compute()
    assert clusters.labels.chunks[0] == dX.chunks[0] and clusters.rounds >= 2
    assert expected.n_clusters < X.shape[0]   # there are clusters to find
    np.testing.assert_array_equal(labels, expected.representatives[expected.labels])
    np.testing.assert_array_equal(clusters.representatives.compute(), expected.representatives)
    assert len(clusters.pairs) == len(expected.pairs)


def test_synchronous_scheduler_codes_empty_blocks_and_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    X = dense_planted(n_groups=40, group_size=4, n_background=60, dim=24, seed=4)
    dX = da.from_array(X, chunks=(100, 24)).rechunk({0: (0, 60, 100, 0, 60)})   # empty row blocks too
    m = create_map(DENSE_GCWS)
    with dask.config.set(scheduler="sync"):
        expected = similarity_join(X, m, 0.6, verify="codes")
        pairs = fhd.similarity_join(dX, DENSE_GCWS, 0.6, verify="codes", partitions=3)
        _assert_same_pairs(pairs, expected)
        pairs.to_parquet(tmp_path / "pairs")   # written partition by partition
        written = pd.read_parquet(tmp_path / "pairs").sort_values(["i", "j"])
        np.testing.assert_array_equal(written["j"].to_numpy(), expected.j)
        clusters = fhd.duplicate_clusters(dX, DENSE_GCWS, 0.6, mode="representatives")
        reference = duplicate_clusters(X, m, 0.6, mode="representatives")
        np.testing.assert_array_equal(clusters.labels.compute(), reference.representatives[reference.labels])


def test_a_chain_is_one_component_and_split_by_representatives():
    """Rows 0-1-2-3 each similar only to the next, one per block: the components reach across blocks
    in several rounds; the greedy rule keeps 0 and 2 (1 joins 0, 3 joins 2), like in process."""
    spec = {"method": "binning", "input_dim": 1, "n_components": 256, "seed": 1, "params": {"gamma": 1.0}}
    X = np.array([[0.0], [0.2], [0.4], [0.6]])   # neighbours: exp(-0.2) = 0.82; two apart: exp(-0.4) = 0.67
    dX = da.from_array(X, chunks=(1, 1))
    with dask.config.set(scheduler="sync"):
        components = fhd.duplicate_clusters(dX, spec, 0.75, target_recall=0.999)
        greedy = fhd.duplicate_clusters(dX, spec, 0.75, mode="representatives", target_recall=0.999)
        np.testing.assert_array_equal(components.labels.compute(), [0, 0, 0, 0])
        np.testing.assert_array_equal(greedy.labels.compute(), [0, 0, 2, 2])
        np.testing.assert_array_equal(greedy.representatives.compute(), [0, 2])


def test_bad_input_is_refused_before_anything_runs():
    dX = da.ones((10, 24), chunks=(5, 24))
    with pytest.raises(InputError, match="discrete codes"):
        fhd.similarity_join(dX, {"method": "rff", "input_dim": 24, "n_components": 16, "seed": 0}, 0.5)
    for bad, field in (({"threshold": 0.0}, "threshold"), ({"threshold": 0.5, "target_recall": 1.0}, "target_recall"),
                       ({"threshold": 0.5, "verify": "fast"}, "verify"),
                       ({"threshold": 0.5, "partitions": 0}, "partitions")):
        with pytest.raises(InputError) as info:
            fhd.similarity_join(dX, DENSE_GCWS, **bad)
        assert info.value.field == field
    with pytest.raises(InputError, match="mode"):
        fhd.duplicate_clusters(dX, DENSE_GCWS, 0.5, mode="chains")
    with pytest.raises(InputError, match="chunk sizes"):
        fhd.similarity_join(dX[dX[:, 0] > 0], DENSE_GCWS, 0.5)
