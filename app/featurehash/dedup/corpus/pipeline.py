"""`dedup_corpus`: files in, a deduplicated corpus out, in stages that each leave their output in the work
directory (`<output>/_work`, removed at the end unless kept): read (normalise and hash, one part per input
file), exact (first document of each 128-bit hash), near (signatures, bands, candidates, exact verification of
the exact representatives), clusters and keep policy, write (the kept records re-read from the inputs in their
format, the duplicates table, the summary)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...maps import create_map
from ...maps.errors import InputError
from .against import IndexCheck, item_hashes
from .decide import decide, exact_representatives, parse_keep
from .files import expand
from .kept import output_like, write_kept, write_whole_files
from .near import near_pairs, pair_similarities
from .normalise import default_spec
from .records import Fields
from .remote import RemoteOutput, is_url
from .scan import ON_ERROR, SCHEMA, ScanCounts, scan_batches
from .stages import AnonymousPeak, Clock, Workdir, current_rss, fingerprint, peak_rss
from .vector_near import vector_near_pairs, vector_pair_similarities
from .vectors import SCHEMAS, VectorFields, check_map, scan_vector_batches, vector_spec
from .writing import ShardWriter

DUPLICATES = pa.schema([("id", pa.string()), ("cluster", pa.int64()), ("kept_id", pa.string()),
                        ("similarity", pa.float64()), ("kind", pa.string())])


def dedup_corpus(inputs, output, *, threshold: float = 0.7, spec: dict | None = None, weighted: bool = False,
                 target_recall: float = 0.95, keep: str = "first", text_field: str = "text",
                 id_field: str | None = None, input_format: str | None = None, text_unit: str = "line",
                 on_error: str = "raise", memory_budget: float | None = None, shard_rows: int = 100_000,
                 output_format: str | None = None, reference=None, force: bool = False, keep_work: bool = False,
                 progress: bool = False, vector_field: str | None = None, tokens_field: str | None = None,
                 against_index=None, add_to_index: bool = False, work_dir=None) -> dict:
    """Deduplicate the corpus at `inputs` (a file, folder, glob, URL or a list of them) into the folder `output`
    (a local path or any fsspec URL); the summary (also written as `output/summary.json`).

    Near duplicates are pairs whose similarity under the map is >= `threshold`: `spec` (a gcws, minhash or binning map
    with a text stage), else `default_spec(weighted)`: word 3-shingles, Jaccard (or with `weighted`, weighted
    Jaccard of 1 + log count weights). `vector_field` / `tokens_field` (JSON Lines or Parquet): records that are a
    vector or a token list rather than a text (`vectors`: forms, canonical hash, `vector_spec`). `reference`: an
    already clean corpus (same forms of input) that new documents are checked against; its documents are never
    removed nor written. `against_index`: an opened LSH index (`featurehash.store.LSHIndexes(...).open(name)`)
    standing for such a corpus (`against`), `add_to_index` adding the kept documents to it. `keep`: first, longest,
    shortest, max:<field>, min:<field>. `output_format` (jsonl, parquet, csv, text; None: the input's,
    every field as read). `on_error`: "raise" (a bad record is an InputError naming file and
    line) or "skip" (skipped, counted and the first few named in the summary). An existing finished output is
    refused unless `force`; an unfinished one of the same inputs and options is resumed. An output URL is
    staged in `work_dir` (local; default a temporary folder named by the run) and uploaded at the end
    (`remote`)."""
    _, key_field = parse_keep(keep)
    index = IndexCheck(against_index, add_to_index) if against_index is not None else None
    if add_to_index and index is None:
        raise InputError("add_to_index", "needs an index to add to (against_index)")
    fields, feature_map = fields_and_map(text_field, id_field, key_field, text_unit, vector_field, tokens_field,
                                         spec, weighted, index)
    if shard_rows < 1:
        raise InputError("shard_rows", "must be positive")
    if not 0.0 < threshold <= 1.0:
        raise InputError("threshold", "must lie in (0, 1]")
    if on_error not in ON_ERROR:
        raise InputError("on_error", f"one of {', '.join(ON_ERROR)}")
    if text_unit not in ("line", "file"):
        raise InputError("text_unit", "'line' or 'file'")
    if output_format not in (None, "jsonl", "parquet", "csv", "text"):
        raise InputError("output_format", "one of jsonl, parquet, csv, text (None: the input's)")
    if isinstance(fields, VectorFields) and output_format in ("csv", "text"):
        raise InputError("output_format", f"{fields.kind} records are written as jsonl or parquet")
    new = expand(inputs, input_format)
    old = expand(reference, input_format) if reference else []
    files = old + new
    options = {"threshold": threshold, "spec": feature_map.spec.id, "target_recall": target_recall, "keep": keep,
               "fields": asdict(fields), "on_error": on_error, "reference": len(old), "shard_rows": shard_rows,
               "output_format": output_format, "against_index": index.name if index else None,
               "add_to_index": add_to_index}
    print_ = fingerprint(files, options)
    remote = RemoteOutput(os.fspath(output), work_dir, force) if is_url(output) else None
    if remote is None and work_dir is not None:
        raise InputError("work_dir", "stages an output URL; a local output's work is <output>/_work")
    local = remote.staging(print_) if remote is not None else output
    work = Workdir(local, print_, force)
    try:
        summary = _run(work, files, len(old), fields, feature_map, threshold, target_recall, keep, on_error,
                       memory_budget, shard_rows, output_format, keep_work or remote is not None, progress, index)
    except InputError:
        work.abandon()
        raise
    if remote is None:
        return summary
    if not keep_work:
        work.remove()
    return remote.publish(os.fspath(local), summary, keep_work)


def fields_and_map(text_field, id_field, key_field, text_unit, vector_field, tokens_field, spec, weighted,
                   index=None):
    """(Fields or VectorFields, the near stage's map) of a run's options (every engine's too)."""
    if vector_field and tokens_field:
        raise InputError("vector_field", "give a vector field or a tokens field, not both")
    kind, column = ("vector", vector_field) if vector_field else ("tokens", tokens_field)
    given = create_map(spec) if spec else None
    if index is not None:
        feature_map = index.map_for(given)
    elif given is not None:
        feature_map = given
    else:
        feature_map = create_map(vector_spec(kind, weighted) if column else default_spec(weighted))
    if not column:
        if feature_map.text_stage is None:
            raise InputError("spec", "needs a text stage (\"input\": {\"hashing\": {...}})")
        return Fields(text=text_field, id=id_field, key=key_field, text_unit=text_unit), feature_map
    fields = VectorFields(text=column, id=id_field, key=key_field, kind=kind, column=column, weighted=weighted)
    return check_map(fields, feature_map), feature_map


def _run(work, files, n_old, fields, feature_map, threshold, target_recall, keep, on_error, memory_budget,
         shard_rows, output_format, keep_work, progress, index=None) -> dict:
    output = str(work.output)
    column = fields.kind if isinstance(fields, VectorFields) else "text"
    anonymous = AnonymousPeak()
    clock = Clock(anonymous)
    parts = [work.path / f"read-{k:05d}.parquet" for k in range(len(files))]
    counts = _read(files, parts, fields, on_error, work, clock, progress)
    n_files = [c["records"] for c in counts]
    columns = pq.read_table(parts, columns=["length", "key", "h0", "h1"]) if parts else None
    hashes = np.stack([columns["h0"].to_numpy(), columns["h1"].to_numpy()], axis=1)
    n = hashes.shape[0]
    reference_mask = np.repeat([k < n_old for k in range(len(files))], n_files).astype(bool)
    started = clock.start()
    rep = exact_representatives(hashes)
    unique = np.flatnonzero(rep == np.arange(rep.size))
    clock.stop("exact", started, unique=int(unique.size))
    a, b, s = _near(parts, unique, feature_map, fields, threshold, target_recall, memory_budget, work, clock,
                    progress)
    lengths, keys, items = columns["length"].to_numpy(), columns["key"].to_numpy(), []
    if index is not None:
        (a, b, s), items = _against(index, parts, column, unique[~reference_mask[unique]], threshold, work, clock,
                                    (a, b, s), n)
        hashes = np.concatenate([hashes, item_hashes(items)])
        lengths, keys = np.append(lengths, np.zeros(len(items), np.int64)), np.append(keys, np.full(len(items), np.nan))
        reference_mask = np.append(reference_mask, np.ones(len(items), dtype=bool))
        rep = exact_representatives(hashes)
    started = clock.start()
    decision = decide(hashes, lengths, keys, reference_mask, a, b, s, keep, rep=rep)
    # an index item's row is not on disk: a document reaching it only through its cluster keeps a NaN similarity
    missing = np.flatnonzero(np.isnan(decision.similarity) & (decision.kept_of < n))
    similar = (vector_pair_similarities(parts, feature_map, column, rep[decision.removed[missing]],
                                        rep[decision.kept_of[missing]]) if isinstance(fields, VectorFields) else
               pair_similarities(parts, feature_map, rep[decision.removed[missing]], rep[decision.kept_of[missing]]))
    decision.similarity[missing] = similar
    clock.stop("clusters", started, clusters=int(np.unique(decision.cluster).size), computed=int(missing.size))
    started = clock.start()
    kept = decision.kept[:n]
    shards = _write(files[n_old:], parts[n_old:], fields, kept[reference_mask[:n].sum():], n_files[n_old:],
                    output, shard_rows, output_format, progress)
    by_index = _duplicates(parts, decision, output, items, n)
    clock.stop("write", started, shards=len(shards))
    if index is not None and index.add_kept:
        started = clock.start()
        added = index.add(parts, column, np.flatnonzero(kept & ~reference_mask[:n]))
        clock.stop("index", started, added=added)
    length = lengths[:n]   # the new and reference documents', not the index items appended after them
    new_mask = ~reference_mask[:n]
    summary = {"documents_in": int(new_mask.sum()), "exact_duplicates": decision.exact_duplicates,
               "near_duplicates": decision.near_duplicates - by_index, "index_duplicates": by_index,
               "kept": int((kept & new_mask).sum()), "bytes_in": int(length[new_mask].sum()),
               "bytes_kept": int(length[kept & new_mask].sum()), "files": len(files) - n_old,
               "reference_documents": int((~new_mask).sum()),
               "blank_lines": sum(c["blank_lines"] for c in counts), "bad_records": sum(c["bad_records"] for c in counts),
               "bad_named": [name for c in counts for name in c["bad_named"]][:20], "shards": shards,
               "duplicates": os.path.join(output, "duplicates.parquet"), "threshold": threshold, "keep": keep,
               "records": fields.kind if isinstance(fields, VectorFields) else "text",
               "spec_id": feature_map.spec.id, "stages": clock.stages, "peak_rss_bytes": peak_rss(),
               "peak_anonymous_bytes": anonymous.stop(),
               "resumed": work.resumed}
    if index is not None:
        summary["index"] = index.figures
    partial = Path(output) / "summary.json.partial"
    partial.write_text(json.dumps(summary, indent=2))
    os.replace(partial, Path(output) / "summary.json")
    if not keep_work:
        work.remove()
    return summary


def _read(files, parts, fields, on_error, work, clock, progress) -> list[dict]:
    from tqdm import tqdm

    out, started, reused = [], clock.start(), 0
    with tqdm(desc="dedup: read", unit="docs", unit_scale=True, disable=not progress) as bar:
        for k, (file, part) in enumerate(zip(files, parts)):
            done = work.done(f"read-{k:05d}")
            if done is not None:
                out.append(done)
                reused += 1
                continue
            counts = ScanCounts()
            vector = isinstance(fields, VectorFields)
            scan = scan_vector_batches if vector else scan_batches
            # a work file read once or twice: neither compressed nor dictionary-encoded (texts are mostly
            # distinct), which cost more CPU than the disk they saved
            with pq.ParquetWriter(f"{part}.partial", SCHEMAS[fields.kind] if vector else SCHEMA,
                                  compression="none", use_dictionary=False) as writer:
                for batch in scan(file, fields, on_error, counts, bar):
                    writer.write_batch(batch)
            os.replace(f"{part}.partial", part)
            work.finish(f"read-{k:05d}", counts.as_dict())
            out.append(counts.as_dict())
    clock.stop("read", started, files=len(files), files_reused=reused,
               documents=sum(c["records"] for c in out))
    return out


def _near(parts, unique, feature_map, fields, threshold, target_recall, memory_budget, work, clock, progress):
    done = work.done("near")
    if done is not None:
        clock.reused("near", done)
        with np.load(work.path / "near.npz") as saved:
            return saved["a"], saved["b"], saved["s"]
    started = clock.start()
    if memory_budget is not None:
        # the budget is the process's: what it holds already (imports and compiled kernels, ~0.5 GB), the
        # columns and decision to come (~64 bytes a document) and the join's unbudgeted working set (a chunk's
        # hashing, a block of pairs: ~0.3 GB measured) are not the join's to spend
        memory_budget = max(memory_budget / 8, memory_budget - current_rss() - 64 * len(unique) - 300e6)
    if isinstance(fields, VectorFields):
        a, b, s, figures = vector_near_pairs(parts, unique, feature_map, fields.kind, threshold,
                                             target_recall=target_recall, memory_budget=memory_budget,
                                             workdir=work.path, progress=progress)
    else:
        a, b, s, figures = near_pairs(parts, unique, feature_map, threshold, target_recall=target_recall,
                                      memory_budget=memory_budget, workdir=work.path, progress=progress)
    np.savez(work.path / "near.npz.partial.npz", a=a, b=b, s=s)
    os.replace(work.path / "near.npz.partial.npz", work.path / "near.npz")
    work.finish("near", clock.stop("near", started, **figures))
    return a, b, s


def _write(files, parts, fields, kept, n_files, output, shard_rows, output_format, progress) -> list[str]:
    """The kept records of each new file, re-read in order: the k-th good record of a file is its part's k-th."""
    from tqdm import tqdm

    for stale in Path(output).glob("part-*"):   # an interrupted write stage starts over
        stale.unlink()
    writer = ShardWriter(output, output_like(files[0], output_format), shard_rows)
    base = 0
    try:
        with tqdm(total=int(kept.size), desc="dedup: write", unit="docs", unit_scale=True, disable=not progress) as bar:
            for k, (file, part, count) in enumerate(zip(files, parts, n_files)):
                numbers = pq.read_table(part, columns=["number"])["number"].to_numpy()
                keep = set(numbers[kept[base:base + count]].tolist())
                base += count
                if fields.text_unit == "file" and file.format == "text":
                    writer.shards += write_whole_files(file, fields, keep, output, k)
                else:
                    write_kept(file, fields, keep, writer)
                bar.update(count)
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def _against(index, parts, column, representatives, threshold, work, clock, pairs, n):
    """The near pairs with the index's hits added as pairs to items n, n + 1, ...; the items' ids. Resumable:
    the hits are kept in the work directory (the index may have changed since, the run's result may not)."""
    done = work.done("index-check")
    if done is not None:
        clock.reused("index-check", done)
        with np.load(work.path / "index.npz") as saved:
            where, similarity = saved["where"], saved["similarity"]
        found = json.loads((work.path / "index-items.json").read_text())
    else:
        started = clock.start()
        where, found, similarity = index.check(parts, column, representatives, threshold)
        (work.path / "index-items.json").write_text(json.dumps(found))
        np.savez(work.path / "index.npz.partial.npz", where=where, similarity=similarity)
        os.replace(work.path / "index.npz.partial.npz", work.path / "index.npz")
        work.finish("index-check", clock.stop("index-check", started, hits=int(where.size), **index.figures))
    items, item_of = np.unique(np.asarray(found, dtype=object).astype(str), return_inverse=True) if found else \
        (np.zeros(0, dtype=str), np.zeros(0, dtype=np.int64))
    a, b, s = pairs
    return ((np.concatenate([a, where]), np.concatenate([b, n + item_of.astype(np.int64)]),
             np.concatenate([s, similarity])), items.tolist())


def _duplicates(parts, decision, output, items=(), n=None) -> int:
    """Write duplicates.parquet; how many were removed as near duplicates of an index's item."""
    ids = pq.read_table(parts, columns=["id"])["id"].cast(pa.string())
    if items:
        ids = pa.chunked_array(ids.chunks + [pa.array(list(items), pa.string())], pa.string())
    by_index = decision.kept_of >= n if n is not None else np.zeros(decision.removed.size, dtype=bool)
    kind = np.where(decision.exact, "exact", np.where(by_index, "index", "near"))
    table = pa.table({"id": ids.take(pa.array(decision.removed)).cast(pa.string()),
                      "cluster": pa.array(decision.cluster, pa.int64()),
                      "kept_id": ids.take(pa.array(decision.kept_of)).cast(pa.string()),
                      "similarity": pa.array(decision.similarity, pa.float64()),
                      "kind": pa.array(kind.tolist(), pa.string())},
                     schema=DUPLICATES)
    pq.write_table(table, f"{output}/duplicates.parquet.partial")
    os.replace(f"{output}/duplicates.parquet.partial", f"{output}/duplicates.parquet")
    return int((by_index & ~decision.exact).sum())
