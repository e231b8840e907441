"""A corpus deduplicated on Ray Data: the files scanned in parallel (one task per file), the near duplicates
joined by `featurehash.ray.similarity_join` on the normalised texts, each file's kept records written by a task
of its own; the driver decides clusters and keep policy from the small columns and the pairs
(`featurehash.engines.corpus`), so the kept set and duplicates table equal `featurehash.dedup.corpus`'s."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dedup.corpus import CorpusFile
from ..dedup.corpus.distributed import scan_file, write_file
from ..engines.corpus import CorpusRun
from .join import similarity_join


def dedup_corpus(inputs, output, *, partitions: int = 8, **options) -> dict:
    """Deduplicate the corpus at `inputs` into the folder `output` on the current Ray cluster; options and
    outputs as `featurehash.dedup.corpus.dedup_corpus`'s (shards `part-<file>-NNNNN`), `partitions` as the
    join's."""
    import ray
    import ray.data

    run = CorpusRun(inputs, output, **options)
    listing = ray.data.from_items([{"file": k, "path": f.path, "format": f.format, "compression": f.compression or ""}
                                   for k, f in enumerate(run.files)], override_num_blocks=max(1, len(run.files)))
    scanned = listing.map_batches(_scan, batch_size=1, batch_format="pyarrow",
                                  fn_kwargs={"fields": run.fields, "on_error": run.on_error, "spec": run.spec})
    scanned = scanned.materialize()
    small = pa.concat_tables(ray.get(scanned.drop_columns(["text"]).to_arrow_refs()))
    is_count = pc.less(small["number"], 0)
    counts = [json.loads(i) for i in small.filter(is_count)["id"].to_pylist()]
    plan = run.planned(small.filter(pc.invert(is_count)), counts)
    run.lap("read")
    rows = scanned.map_batches(_positioned, batch_format="pyarrow",
                               fn_kwargs={"offsets": plan.offsets, "wanted": plan.near_rows})
    pairs = similarity_join(rows, run.spec, run.threshold, column="text", id_col="position",
                            target_recall=run.target_recall, partitions=partitions).materialize()
    found = pa.concat_tables(ray.get(pairs.to_arrow_refs())) if pairs.count() else None
    a, b, s = ((found["i"].to_numpy(), found["j"].to_numpy(), found["similarity"].to_numpy()) if found is not None
               else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)))
    run.lap("near")
    needed = run.decided(a, b, s)
    if needed.size:
        got = scanned.map_batches(_positioned, batch_format="pyarrow",
                                  fn_kwargs={"offsets": plan.offsets, "wanted": needed}).take_all()
        run.similarities(np.array([g["position"] for g in got]), [g["text"] for g in got])
    run.lap("clusters")
    todo = [{"file": k, "path": f.path, "format": f.format, "compression": f.compression or "",
             "kept": json.dumps(kept)} for k, f, kept in run.write_plan()]
    written = ray.data.from_items(todo, override_num_blocks=max(1, len(todo))).map_batches(
        _write, batch_size=1, batch_format="pyarrow",
        fn_kwargs={"fields": run.fields, "output": run.output, "shard_rows": run.shard_rows,
                   "output_format": run.output_format}).take_all()
    run.lap("write")
    return run.finished([w["shard"] for w in written], "ray")


def _file(row: dict) -> CorpusFile:
    return CorpusFile(row["path"], row["format"], row["compression"] or None)


def _scan(batch: pa.Table, fields, on_error, spec) -> pa.Table:
    tables = []
    for row in batch.to_pylist():
        table, counts = scan_file(row["file"], _file(row), fields, on_error, spec)
        tail = {name: None for name in table.schema.names} | {"number": -1, "id": json.dumps(counts),
                                                                "file": row["file"], "index": -1}
        tables += [table, pa.Table.from_pylist([tail], schema=table.schema)]
    return pa.concat_tables(tables)


def _positioned(batch: pa.Table, offsets, wanted) -> pa.Table:
    number = batch["number"].to_numpy()
    position = offsets[batch["file"].to_numpy()] + batch["index"].to_numpy()
    keep = (number >= 0) & np.isin(position, wanted)
    return pa.table({"position": pa.array(position[keep], pa.int64()), "text": batch["text"].filter(pa.array(keep))})


def _write(batch: pa.Table, fields, output, shard_rows, output_format) -> pa.Table:
    shards = []
    for row in batch.to_pylist():
        shards += write_file(row["file"], _file(row), fields, json.loads(row["kept"]), output, shard_rows,
                             output_format)
    return pa.table({"shard": pa.array(shards, pa.string())})
