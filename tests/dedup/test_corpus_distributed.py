"""featurehash.dedup.corpus.distributed and featurehash.engines.corpus with the simplest engine, a loop: files
scanned one by one (in reverse, as an engine may finish them), the join in process on the positions the plan
names, files written one by one; the same kept set and duplicates table as dedup_corpus."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from corpus_support import corpus_folder, outcome
from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.dedup.corpus import dedup_corpus, default_spec, document_rows
from featurehash.dedup.corpus.distributed import (
    scan_file,
    text_similarities,
    write_file,
)
from featurehash.engines.corpus import CorpusRun
from featurehash.maps.errors import InputError


def loop_engine(folder, output, **options) -> dict:
    run = CorpusRun(folder, output, **options)
    scanned = {k: scan_file(k, f, run.fields, run.on_error, run.spec) for k, f in reversed(list(enumerate(run.files)))}
    plan = run.planned(pa.concat_tables([t.drop_columns(["text"]) for t, _ in scanned.values()]),
                       [c for _, c in scanned.values()])
    texts = {int(plan.offsets[k] + i): t for k, (table, _) in scanned.items()
             for i, t in enumerate(table["text"].to_pylist())}
    feature_map = create_map(run.spec)
    rows = document_rows(feature_map, [texts[p] for p in plan.near_rows])[0]
    pairs = similarity_join(rows, feature_map, run.threshold, target_recall=run.target_recall)
    needed = run.decided(plan.near_rows[pairs.i], plan.near_rows[pairs.j], pairs.similarity)
    run.similarities(needed, [texts[int(p)] for p in needed])
    shards = [s for k, f, kept in run.write_plan()
              for s in write_file(k, f, run.fields, kept, run.output, run.shard_rows, run.output_format)]
    return run.finished(shards, "loop")


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_loop_engine_equals_one_machine(tmp_path, keep):
    folder = corpus_folder(tmp_path)
    options = {"id_field": "id", "keep": keep, "on_error": "skip", "shard_rows": 10}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = loop_engine(folder, tmp_path / "loop", **options)
    assert outcome(tmp_path / "loop") == outcome(tmp_path / "one")
    assert many["kept"] == one["kept"] and many["bad_named"] == one["bad_named"]
    assert all(name.rsplit("/", 1)[1].startswith("part-0000") for name in many["shards"])


def test_text_similarities_are_the_maps_kernel():
    texts = ["one two three four five", "one two three four six", "nothing alike here at all"]
    got = text_similarities(default_spec(), texts[:2], texts[1:])
    assert got[0] == pytest.approx(2 / 4) and got[1] == 0.0


def test_corpus_run_refuses_as_one_machine(tmp_path):
    folder = corpus_folder(tmp_path)
    dedup_corpus(folder, tmp_path / "done", id_field="id", on_error="skip")
    with pytest.raises(InputError, match="--force"):
        CorpusRun(folder, tmp_path / "done", id_field="id")
    with pytest.raises(InputError, match="threshold"):
        CorpusRun(folder, tmp_path / "x", threshold=1.5)
    with pytest.raises(InputError, match="text stage"):
        CorpusRun(folder, tmp_path / "x", spec={"method": "gcws", "input_dim": 8, "n_components": 16})
    assert np.asarray(CorpusRun(folder, tmp_path / "done", force=True).files).size == 4
