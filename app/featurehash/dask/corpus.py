"""A corpus deduplicated on Dask: the files scanned in parallel (one task per file, kept on the workers), the
near duplicates joined by `featurehash.dask.similarity_join` on a dask array of the representatives' input rows
(one sparse block per file), each file's kept records written by a task of its own; the driver decides clusters
and keep policy from the small columns and the pairs (`featurehash.engines.corpus`), so the kept set and
duplicates table equal `featurehash.dedup.corpus`'s."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from ..dedup.corpus.vector_near import payload_rows
from ..dedup.corpus.distributed import SMALL, scan_file, write_file
from ..engines.corpus import CorpusRun
from ..maps import create_map
from .join import similarity_join


def dedup_corpus(inputs, output, **options) -> dict:
    """Deduplicate the corpus at `inputs` into the folder `output` with the current Dask scheduler (a
    distributed Client when one is active); options and outputs as `featurehash.dedup.corpus.dedup_corpus`'s
    (shards `part-<file>-NNNNN`)."""
    import dask
    import dask.array as da

    run = CorpusRun(inputs, output, **options)
    scans = dask.persist(*[dask.delayed(scan_file, pure=False)(k, f, run.fields, run.on_error, run.spec)
                           for k, f in enumerate(run.files)])
    smalls = dask.compute(*[dask.delayed(_small)(s) for s in scans])
    plan = run.planned(pa.concat_tables([t for t, _ in smalls]), [c for _, c in smalls])
    run.lap("read")
    width = create_map(run.spec).spec.input_dim
    blocks = []
    for k, scanned in enumerate(scans):
        start, stop = plan.offsets[k], plan.offsets[k] + smalls[k][0].num_rows
        wanted = plan.near_rows[(plan.near_rows >= start) & (plan.near_rows < stop)] - start
        if wanted.size:
            block = dask.delayed(_rows)(scanned, wanted, run.spec)
            blocks.append(da.from_delayed(block, shape=(int(wanted.size), width), dtype=np.float64,
                                          meta=sp.csr_matrix((0, width))))
    a = b = np.zeros(0, np.int64)
    s = np.zeros(0)
    if blocks:
        pairs = similarity_join(da.concatenate(blocks), run.spec, run.threshold,
                                target_recall=run.target_recall).compute()
        a, b = plan.near_rows[pairs["i"].to_numpy()], plan.near_rows[pairs["j"].to_numpy()]
        s = pairs["similarity"].to_numpy()
    run.lap("near")
    needed = run.decided(a, b, s)
    if needed.size:
        found = dask.compute(*[dask.delayed(_texts)(scanned, plan.offsets[k], needed) for k, scanned in enumerate(scans)])
        run.similarities(np.concatenate([p for p, _ in found]), [t for _, texts in found for t in texts])
    run.lap("clusters")
    shards = dask.compute(*[dask.delayed(write_file)(k, f, run.fields, kept, run.output, run.shard_rows,
                                                    run.output_format)
                            for k, f, kept in run.write_plan()])
    run.lap("write")
    return run.finished([name for part in shards for name in part], "dask")


def _small(scanned) -> tuple[pa.Table, dict]:
    table, counts = scanned
    return table.select(list(SMALL)), counts


def _rows(scanned, wanted: np.ndarray, spec: dict) -> sp.csr_matrix:
    """The wanted documents' input rows (texts, token lists or vectors: `payload_rows`)."""
    return payload_rows(create_map(spec), scanned[0].column("text").take(pa.array(wanted)))[0]


def _texts(scanned, offset: int, needed: np.ndarray) -> tuple[np.ndarray, list[str]]:
    local = needed[(needed >= offset) & (needed < offset + scanned[0].num_rows)] - offset
    return local + offset, scanned[0].column("text").take(pa.array(local)).to_pylist()
