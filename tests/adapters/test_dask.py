"""featurehash.dask on a LocalCluster with worker processes: the spec travels, results equal in-process."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="dask is an optional extra: pip install 'featurehash[dask]'")
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

import featurehash.dask as fhd  # noqa: E402
from featurehash import InputError, UnsupportedOperation, create_map  # noqa: E402

RFF = {"method": "rff", "input_dim": 64, "n_components": 512, "seed": 3, "params": {"gamma": 0.02}}
WIDE_RFF = RFF | {"n_components": 4096}
GCWS = {"method": "gcws", "input_dim": 64, "n_components": 128, "seed": 4, "params": {"bits": 6}}
BINNING = {"method": "binning", "input_dim": 64, "n_components": 64, "seed": 5, "params": {"gamma": 0.1}}
# Dense features computed in another process, on other row blocks: float32 rounding (BLAS may block
# rows differently); on this machine they are in fact equal bit for bit.
FLOAT32_RTOL = 64 * 2.0**-24


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def data():
    X = np.abs(np.random.default_rng(0).standard_normal((2000, 64))) + 0.01
    return X, da.from_array(X, chunks=(300, 32))


def _in_process(spec, X, operation="transform"):
    return getattr(create_map(spec), operation)(X)


def test_dense_features_equal_in_process(client, data):
    X, dX = data
    Z = fhd.transform(dX, RFF)
    assert Z.shape == (2000, 512) and Z.dtype == np.float32 and Z.chunks[0] == dX.chunks[0]
    computed = Z.compute()
    np.testing.assert_allclose(computed, _in_process(RFF, X), rtol=0, atol=FLOAT32_RTOL * np.sqrt(2 / 512))
    in_float64 = fhd.transform(dX, RFF, dtype=np.float64).compute()
    np.testing.assert_allclose(in_float64, create_map(RFF).transform(X, dtype=np.float64), rtol=1e-12, atol=1e-14)


def test_codes_and_one_hot_features_are_bitwise_in_process(client, data):
    X, dX = data
    for spec in (GCWS, BINNING):
        np.testing.assert_array_equal(fhd.hash(dX, spec).compute(), _in_process(spec, X, "hash"))
    one_hot = fhd.transform(dX, GCWS).compute()
    assert (one_hot != _in_process(GCWS, X).to_csr()).nnz == 0


def test_dataframes_are_read_as_their_columns(client, data):
    # Here, not at the top: dask.dataframe needs pyarrow, whose newest wheels refuse numpy < 2 on import
    # (pip installs them beside numpy 1.26), and the array tests do not need it.
    dd = pytest.importorskip("dask.dataframe", exc_type=ImportError)
    pd = pytest.importorskip("pandas")
    X, _ = data
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"x{i}" for i in range(64)]), npartitions=3)
    np.testing.assert_array_equal(fhd.hash(frame, GCWS).compute(), _in_process(GCWS, X, "hash"))
    assert fhd.transform(frame, RFF).compute().shape == (2000, 512)


def test_the_graph_carries_the_spec_not_the_parameters(client):
    dX = da.random.default_rng(1).standard_normal((400, 64), chunks=(100, 64))
    Z = fhd.transform(dX, WIDE_RFF)
    parameters = create_map(WIDE_RFF).materialize().nbytes  # 64 x 2048 float32 frequencies: 512 KiB
    graph_bytes = len(pickle.dumps(dict(Z.__dask_graph__())))
    assert parameters >= 2**19 and graph_bytes < 20_000, graph_bytes
    np.testing.assert_allclose(Z.compute(), create_map(WIDE_RFF).transform(dX.compute()), rtol=0,
                               atol=FLOAT32_RTOL * np.sqrt(2 / 4096))


def test_a_spec_fitted_to_data_is_fitted_once_and_shipped_resolved(client, data):
    """A reweighted-quadrature request carries rows of data; the graph carries the fitted points and weights."""
    X, dX = data
    request = {"method": "quadrature", "input_dim": 64, "n_components": 32, "seed": 0,
               "params": {"grid": "reweighted", "gamma": 0.05, "fit_sample": X[:100].tolist()}}
    Z = fhd.transform(dX, request)
    graph = pickle.dumps(dict(Z.__dask_graph__()))
    assert b'"fit_sample":null' in graph and b'"points":[[' in graph and b'"fit_sample":[[' not in graph
    np.testing.assert_allclose(Z.compute(), create_map(request).transform(X), rtol=0, atol=FLOAT32_RTOL)


def test_bad_input_is_refused_before_anything_runs(data):
    _, dX = data
    with pytest.raises(ValueError, match="wrong dimension"):
        fhd.transform(dX[:, :10], RFF)
    with pytest.raises(UnsupportedOperation):
        fhd.hash(dX, RFF)


def test_a_malformed_scipy_matrix_is_refused_before_dask_slices_it(data):
    """scipy does not check a matrix's indices, and its row slicing (dask's blocks) drops or reads outside ones."""
    import scipy.sparse as sp

    X = sp.csr_matrix(data[0][:1000])
    X.indices = X.indices.copy()
    X.indices[64 * 700 + 5] = 10**9   # row 700
    for operation in (fhd.transform, fhd.hash):
        with pytest.raises(InputError, match="row 700: column index 1000000000 lies outside"):
            operation(X, GCWS)


# -- text ------------------------------------------------------------------------------------

DOCUMENTS = [f"report {i}: the {['cat', 'dog', 'fox'][i % 3]} sat by door {i % 11} near the old mill" for i in range(300)]
HASHING = {"method": "hashing", "input_dim": 1, "n_components": 2**12, "seed": 6, "params": {"ngram_range": [1, 2]}}
TEXT_GCWS = {"method": "gcws", "n_components": 64, "seed": 7, "params": {"sampler": "dart"},
             "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}}


def test_a_bag_of_documents_or_tokens_gives_the_in_process_features_and_codes(client):
    db = pytest.importorskip("dask.bag")
    bag = db.from_sequence(DOCUMENTS, npartitions=4)
    Z = fhd.transform(bag, HASHING)
    assert Z.shape[1] == 2**12 and len(Z.chunks[0]) == 4   # row counts known once computed
    assert (Z.compute() != create_map(HASHING).transform(DOCUMENTS)).nnz == 0
    np.testing.assert_array_equal(fhd.hash(bag, TEXT_GCWS).compute(), _in_process(TEXT_GCWS, DOCUMENTS, "hash"))
    tokens = [document.split() for document in DOCUMENTS]
    one_hot = fhd.transform(db.from_sequence(tokens, npartitions=3), TEXT_GCWS).compute()
    assert (one_hot != create_map(TEXT_GCWS).transform(tokens).to_csr()).nnz == 0
    graph_bytes = len(pickle.dumps(dict(fhd.hash(bag, TEXT_GCWS).__dask_graph__())))
    assert graph_bytes < 40_000, graph_bytes   # the documents and the spec's JSON, no map parameters


def test_a_text_column_gives_the_codes(client):
    dd = pytest.importorskip("dask.dataframe", exc_type=ImportError)
    pd = pytest.importorskip("pandas")
    frame = dd.from_pandas(pd.DataFrame({"text": DOCUMENTS, "n": np.arange(300)}), npartitions=3)
    np.testing.assert_array_equal(fhd.hash(frame["text"], TEXT_GCWS).compute(),
                                  _in_process(TEXT_GCWS, DOCUMENTS, "hash"))
    assert fhd.transform(frame["text"], HASHING).compute().shape == (300, 2**12)


def test_text_needs_a_spec_that_reads_text_and_bad_rows_name_their_partition():
    db = pytest.importorskip("dask.bag")
    with pytest.raises(ValueError, match="reads vectors, not text"):
        fhd.hash(db.from_sequence(DOCUMENTS[:4]), GCWS)
    bag = db.from_sequence([*DOCUMENTS[:5], 7.5], npartitions=2)   # the number: row 2 of partition 1
    with pytest.raises(ValueError, match=r"partition 1, row 2"):
        fhd.hash(bag, TEXT_GCWS).compute(scheduler="sync")
