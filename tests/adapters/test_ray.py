"""featurehash.ray on a real local Ray (ray.init(num_cpus=2) once for the module) against the library in
process on the same rows: codes and band keys bit for bit, dense features to the README's float promise
(tests/feature_promises.py) in each of Ray's batch formats (numpy, pandas, pyarrow), the join's pairs
(one Dataset, and two with Y=) and the cluster labels identical, for dense tensor columns, {indices,
values} sparse rows and text. Each join runs once and is checked for everything it gives (its pairs and
the clusters built from them).

Where the time goes (measured on 2 cores): not in the work (milliseconds per stage on these rows) but in
starting Ray worker processes, ~3-5 s of CPU each (ray.data, pyarrow, polars, featurehash imported). Ray
keeps only num_cpus idle workers and kills the rest after a second, so every pipeline, and each of a
join's ~15 operators, started some again (a join: ~12 s; the same join with the workers kept: ~1 s). The
module's cluster keeps its idle workers, and the batch stages run as instances on tasks (which reuse
them), with one stage per pipeline on an actor (a new process each) to hold the class's actor form too."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.data", reason="ray is an optional extra: pip install 'featurehash[ray]'")
import featurehash.ray as fhr
import ray
import scipy.sparse as sp
from engine_support import assert_same_pairs, cases
from feature_promises import FLOAT64_RELATIVE, assert_dense_features_match
from featurehash import create_map
from featurehash.dedup import candidates, duplicate_clusters, similarity_join
from featurehash.maps import InputError
from featurehash.lsh.banding import choose_bands

CASES = cases()
# One worker runs this module (pyproject's --dist loadgroup), so one Ray cluster is started, not one per worker.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def ray_data():
    # small: no dashboard, no log forwarding, a 256 MB object store (the tests move a few MB); idle workers
    # are kept for the module (up to 4) rather than killed after 1 s, so that later pipelines reuse them
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=256 * 1024 ** 2,
             _system_config={"num_workers_soft_limit": 4, "idle_worker_killing_time_threshold_ms": 600_000})
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    yield ray.data
    ray.shutdown()


def _items(rows, first_id: int = 0) -> list[dict]:
    if sp.issparse(rows):
        rows = sp.csr_matrix(rows)
        return [{"id": r, "x": {"indices": rows.indices[a:b].tolist(), "values": rows.data[a:b].tolist()}}
                for r, (a, b) in enumerate(zip(rows.indptr[:-1], rows.indptr[1:]), first_id)]
    return [{"id": r, "x": row} for r, row in enumerate(rows, first_id)]


def _stage(ds, batch_format: str, spec, output: str, on: str = "tasks", **options):
    """One map_batches stage: an instance on tasks (half a CPU each), or the class on an actor pool of one
    (half a CPU: the stages share two). A task stage before an actor stage runs fused into the actor."""
    if on == "actor":
        return ds.map_batches(fhr.FeatureHashBatches, fn_constructor_kwargs={
            "spec": spec, "column": "x", "output_column": output, **options}, batch_format=batch_format,
            batch_size=64, num_cpus=0.5, compute=ray.data.ActorPoolStrategy(size=1))
    return ds.map_batches(fhr.FeatureHashBatches(spec, "x", output, **options), batch_format=batch_format,
                          batch_size=64, num_cpus=0.5)


def _collect(ds):
    return ds.drop_columns(["x"]).to_pandas().sort_values("id").reset_index(drop=True)


def test_dense_batches_in_every_format_equal_in_process(ray_data):
    """Codes (numpy), band keys (pandas, on an actor), float32 (pyarrow) and float64 (numpy) features of a
    tensor column."""
    rows, gcws, threshold, feature_spec = CASES["dense"]
    ds = ray_data.from_items(_items(rows), override_num_blocks=2)
    ds = _stage(ds, "numpy", gcws, "codes", what="codes")
    ds = _stage(ds, "pandas", gcws, "keys", "actor", what="band_keys", threshold=threshold)
    ds = _stage(ds, "pyarrow", feature_spec, "z32")
    got = _collect(_stage(ds, "numpy", feature_spec, "z64", dtype=np.float64))
    codes = create_map(gcws).hash(rows)
    np.testing.assert_array_equal(np.stack(got["codes"]), codes)
    keys, _ = candidates.band_keys(codes, *choose_bands(128, threshold, 0.95))
    np.testing.assert_array_equal(np.stack(got["keys"]), keys.T.view(np.int64))
    feature_map = create_map(feature_spec)
    Z32 = np.stack(got["z32"])
    assert Z32.dtype == np.float32
    assert_dense_features_match(Z32, np.stack(got["z64"]), feature_map.transform(rows, dtype=np.float32),
                                feature_map.transform(rows, dtype=np.float64))


def test_sparse_rows_and_text_equal_in_process(ray_data):
    """{indices, values} rows: codes (pyarrow, on an actor), float64 features (pandas); documents: codes
    (numpy) and the hashing map's sparse features (pyarrow)."""
    rows, gcws, _, feature_spec = CASES["sparse"]
    got = _collect(_stage(_stage(ray_data.from_items(_items(rows), override_num_blocks=2), "pyarrow", gcws, "codes",
                                 "actor", what="codes"), "pandas", feature_spec, "z64", dtype=np.float64))
    np.testing.assert_array_equal(np.stack(got["codes"]), create_map(gcws).hash(rows))
    expected = create_map(feature_spec).transform(rows, dtype=np.float64)
    np.testing.assert_allclose(np.stack(got["z64"]), expected, rtol=0,
                               atol=FLOAT64_RELATIVE * np.abs(expected).max())
    documents, gcws, _, hashing = CASES["text"]
    got = _collect(_stage(_stage(ray_data.from_items(_items(documents), override_num_blocks=2), "numpy", gcws,
                                 "codes", what="codes"), "pyarrow", hashing, "z"))
    np.testing.assert_array_equal(np.stack(got["codes"]), create_map(gcws).hash(documents))
    got_rows = sp.vstack([sp.csr_matrix((v["values"], v["indices"], [0, len(v["indices"])]), shape=(1, v["size"]))
                          for v in got["z"]])
    np.testing.assert_allclose(got_rows.toarray(), create_map(hashing).transform(documents).toarray(), rtol=1e-6)


@pytest.mark.parametrize(("name", "mode"), [("dense", "components"), ("sparse", "representatives"),
                                            ("text", "components")])
def test_join_and_clusters_equal_in_process(ray_data, name, mode):
    """One join per case: its pairs, then the cluster labels built from them (streamed to the driver)."""
    rows, gcws, threshold, _ = CASES[name]
    ds = ray_data.from_items(_items(rows), override_num_blocks=1)
    clusters = fhr.duplicate_clusters(ds, gcws, threshold, mode=mode, column="x", partitions=1)
    expected = duplicate_clusters(rows, create_map(gcws), threshold, mode=mode)
    pairs = clusters.pairs.to_pandas().sort_values(["i", "j"]).reset_index(drop=True)
    assert_same_pairs(pairs["i"].to_numpy(), pairs["j"].to_numpy(), pairs["similarity"].to_numpy(), expected.pairs)
    labels = clusters.labels.to_pandas().sort_values("id")
    assert expected.n_clusters == clusters.n_clusters < len(labels)
    np.testing.assert_array_equal(labels["label"].to_numpy(), expected.representatives[expected.labels])
    np.testing.assert_array_equal(np.sort(clusters.representatives.to_pandas()["id"]), expected.representatives)


def test_join_of_two_datasets_equals_in_process(ray_data):
    """Y=: the pairs between two Datasets (the sparse rows cut in two, Y's ids from 1000) are the
    in-process cross join's, verified by codes. One case: the rows' kinds move through the same steps
    (tested above on one Dataset), and each Ray Data join costs several seconds of scheduling."""
    name, verify = "sparse", "codes"
    rows, gcws, threshold, _ = CASES[name]
    half = (rows.shape[0] if hasattr(rows, "shape") else len(rows)) // 2
    X, Y = rows[:half], rows[half:]
    pairs = fhr.similarity_join(ray_data.from_items(_items(X), override_num_blocks=1), gcws, threshold,
                                Y=ray_data.from_items(_items(Y, 1000), override_num_blocks=1), column="x",
                                verify=verify, partitions=1).to_pandas()
    pairs = pairs.sort_values(["i", "j"]).reset_index(drop=True)
    expected = similarity_join(X, create_map(gcws), threshold, Y=Y, verify=verify)
    assert_same_pairs(pairs["i"].to_numpy(), pairs["j"].to_numpy() - 1000, pairs["similarity"].to_numpy(),
                      expected)


def test_bad_input_is_refused_on_the_driver():
    _, gcws, _, feature_spec = CASES["dense"]
    with pytest.raises(InputError, match="discrete codes"):
        fhr.similarity_join(None, feature_spec, 0.5)
    with pytest.raises(InputError) as info:
        fhr.similarity_join(None, gcws, 1.5)
    assert info.value.field == "threshold"
    with pytest.raises(InputError) as info:
        fhr.FeatureHashBatches(gcws, "x", what="keys")
    assert info.value.field == "what"


def test_an_instance_ships_after_a_batch_on_the_driver():
    """What a task stage pickles to its tasks: the spec, never the map. A map that has computed holds
    compiled closures that do not pickle, and an instance that kept one could not be shipped once it had
    run a batch on the driver (e.g. tried on a sample). The unpickled instance gives the same batch."""
    import pickle

    rows, _, _, feature_spec = CASES["dense"]
    batches = fhr.FeatureHashBatches(feature_spec, "x", dtype=np.float64)
    on_the_driver = batches({"x": rows[:5]})["features"]
    shipped = pickle.dumps(batches)
    assert len(shipped) < 4096
    np.testing.assert_array_equal(pickle.loads(shipped)({"x": rows[:5]})["features"], on_the_driver)
    np.testing.assert_array_equal(on_the_driver, create_map(feature_spec).transform(rows[:5], dtype=np.float64))


def test_an_existing_output_column_is_refused_in_every_format():
    """Two stages of one spec in a row (the guide's actor line, then its task line) appended a second
    `features` column, which failed far from the cause; the second stage now names it."""
    import pandas as pd
    import pyarrow as pa

    rows, _, _, feature_spec = CASES["dense"]
    batches = fhr.FeatureHashBatches(feature_spec, "x")
    once = batches({"x": rows[:3]})
    for batch in (once, pd.DataFrame({"x": list(rows[:3]), "features": list(once["features"])}),
                  pa.table({"x": list(rows[:3]), "features": [list(r) for r in once["features"]]})):
        with pytest.raises(InputError, match="already has a column 'features'") as info:
            batches(batch)
        assert info.value.field == "output_column"
    with pytest.raises(InputError, match="no column 'y'") as info:
        fhr.FeatureHashBatches(feature_spec, "y")({"x": rows[:3]})
    assert info.value.field == "column"


def test_clusters_without_an_id_column_name_it(ray_data):
    rows, gcws, _, _ = CASES["dense"]
    ds = ray_data.from_items([{"x": row} for row in rows[:20]])
    with pytest.raises(InputError, match="no column 'id'") as info:
        fhr.duplicate_clusters(ds, gcws, 0.7, column="x")
    assert info.value.field == "id_col"
    with pytest.raises(InputError, match="no column 'vectors'") as info:
        fhr.similarity_join(ds, gcws, 0.7, column="vectors")
    assert info.value.field == "column"
