"""featurehash.ray.dedup_corpus on a real local Ray (num_cpus=2) against featurehash.dedup.corpus on one machine:
the same kept records and duplicates table (by id) on the small corpus of test_spark_corpus."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.data", reason="ray is an optional extra: pip install 'featurehash[ray]'")
import featurehash.ray as fhr
import ray
from corpus_support import corpus_folder, outcome
from featurehash.dedup.corpus import dedup_corpus

pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=256 * 1024 ** 2,
             _system_config={"num_workers_soft_limit": 4, "idle_worker_killing_time_threshold_ms": 600_000})
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def test_ray_equals_one_machine(ray_cluster, tmp_path):
    folder = corpus_folder(tmp_path)
    options = {"id_field": "id", "keep": "longest", "on_error": "skip", "shard_rows": 10}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhr.dedup_corpus(folder, tmp_path / "ray", partitions=2, **options)
    assert outcome(tmp_path / "ray") == outcome(tmp_path / "one")
    for name in ("documents_in", "exact_duplicates", "near_duplicates", "kept", "bad_records", "bytes_kept"):
        assert many[name] == one[name], name


@pytest.mark.parametrize("kind", ["tokens", "vector"])
def test_ray_vectors_and_tokens_equal_one_machine(ray_cluster, tmp_path, kind):
    from corpus_support import vector_folder

    folder = vector_folder(tmp_path, kind)
    options = {"id_field": "id", "keep": "min:score", "shard_rows": 10, f"{kind}_field": kind}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhr.dedup_corpus(folder, tmp_path / "many", **options)
    assert outcome(tmp_path / "many") == outcome(tmp_path / "one")
    assert many["near_duplicates"] == one["near_duplicates"] > 0 and many["kept"] == one["kept"]
