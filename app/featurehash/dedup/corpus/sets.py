"""The near-duplicate stage's path for plain-set minhash over shingles (the default, `normalise.default_spec`):
documents -> `shingle_hashes` (compiled, no token strings) -> the map's columns -> `MinHash.hash_tokens` (compiled),
with no sparse matrix built and no Python per token.

It gives what the general path (`document_rows` -> the map's `hash` -> `similarity_join`) gives, pair for pair:
- a document's set is the columns of its binary hashing row: the 32-bit murmur3 hash h of each shingle (the text
  stage's key), column floor(h n / 2^32) (featurehash.maps.text.hashing, "murmur3"); with `alternate_sign` off
  and binary weights no column cancels, so the row's support is exactly that set of columns;
- the minhash of a CSR row reads its column indices as the set's elements, so `hash_tokens` of the columns gives
  the same codes;
- verification is the Jaccard of the two column sets (the Jaccard code family's exact similarity: the
  supports' Jaccard), computed by a compiled merge.
The sets are written to the work directory and memory-mapped back (4 bytes a shingle), so the rows the
verifier reads cost no anonymous memory whatever the corpus's size; the band keys follow the join's budget rules
(`featurehash.dedup.keys`, `featurehash.dedup.spill`)."""

from __future__ import annotations

import math
from pathlib import Path

import numba as nb
import numpy as np
import pyarrow as pa

from ...lsh.band_kernels import mix
from ...lsh.banding import BAND_SALT, FINGERPRINT_SALT
from ...maps.base import CodeFamily
from ...maps.numerics._row_threads import held_blas
from ...maps.text.analyzers import Analyzer
from ...maps.text.documents import CompiledAnalyzer, hash_key, shingle_hashes
from .. import candidates
from .. import output as pair_output
from ..keys import hash_collection
from ..spill import BandKeySpill, plan_spill
from .textpass import utf8_column

# bytes of memory per pair of a verified block (indices, gathered keys, similarities, masks), as the join's
_PAIR_WORK = 256


def takes_sets(feature_map) -> bool:
    """Whether `feature_map` is a minhash over a text stage whose rows' supports are exactly the shingles'
    columns (binary weights, no alternate sign, murmur3 hash): then this path gives the general path's pairs."""
    stage = getattr(feature_map, "text_stage", None)
    if stage is None or feature_map.code_family is not CodeFamily.JACCARD:
        return False
    if getattr(feature_map.params, "code_bits", None) is not None or feature_map.params.variant == "circulant":
        return False
    p = stage.params
    return (stage.method == "hashing" and p.hash == "murmur3" and not p.alternate_sign
            and p.weighting == "binary" and stage.spec.n_components <= 2**32)


def document_columns(feature_map, texts) -> tuple[np.ndarray, np.ndarray]:
    """(columns uint32, offsets int64 of n + 1): each document's shingles' columns, in document order with
    repeats kept (its set is their distinct values; neither the minhash nor `jaccard_pairs` needs them sorted,
    so the batch is never sorted: sorting cost a quarter of the stage's CPU). `texts`: a list of str or an
    Arrow string array."""
    stage = feature_map.text_stage
    p = stage.params
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        hashes, offsets = _arrow_shingle_hashes(stage, texts)
    else:
        hashes, offsets = shingle_hashes(texts, analyzer=p.analyzer, ngram_range=tuple(p.ngram_range),
                                         lowercase=p.lowercase, strip_accents=p.strip_accents,
                                         token_pattern=p.token_pattern, seed=stage.spec.seed)
    hashes *= np.uint64(stage.spec.n_components)
    hashes >>= np.uint64(32)
    return hashes.astype(np.uint32), offsets


class _Rows:
    """An Arrow string array read as a sequence of str, for the rare rows the compiled pass leaves to Python."""

    def __init__(self, array):
        self.array = array

    def __getitem__(self, k):
        return _Rows(self.array[k]) if isinstance(k, slice) else self.array[k].as_py()

    def __len__(self):
        return len(self.array)


def _arrow_shingle_hashes(stage, texts) -> tuple[np.ndarray, np.ndarray]:
    """`shingle_hashes` of an Arrow string array, its UTF-8 buffer handed to the compiled pass as it is."""
    p = stage.params
    spec = Analyzer(p.analyzer, tuple(p.ngram_range), p.lowercase, p.strip_accents, p.token_pattern)
    if not CompiledAnalyzer.supports(spec) or texts.null_count:
        return shingle_hashes(texts.to_pylist(), analyzer=p.analyzer, ngram_range=tuple(p.ngram_range),
                              lowercase=p.lowercase, strip_accents=p.strip_accents, token_pattern=p.token_pattern,
                              seed=stage.spec.seed)
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    data, starts = utf8_column(texts)
    parts = CompiledAnalyzer(spec).map_rows(_Rows(texts), data, starts, hash_key(p.hash, stage.spec.seed),
                                            lambda h, c: (h, c))
    hashes = np.concatenate([h for h, _ in parts]).astype(np.uint64)
    offsets = np.zeros(starts.size, dtype=np.int64)
    np.cumsum(np.concatenate([c for _, c in parts]), out=offsets[1:])
    return hashes, offsets


@nb.njit(nogil=True, cache=True)
def _distinct_sorted(values):
    out = np.sort(values)
    size = 0
    for t in range(out.size):
        if size == 0 or out[t] != out[size - 1]:
            out[size] = out[t]
            size += 1
    return out[:size]


@nb.njit(nogil=True, cache=True)
def jaccard_pairs(elements, offsets, i, j):
    """|S n T| / |S u T| of the sets of distinct elements of rows i[t], j[t] (1 for two empty sets, as
    minhash's GMM(0, 0)). Rows are sorted here, pair by pair: a row is a candidate far less often than it is
    read."""
    out = np.empty(i.size, dtype=np.float64)
    for t in range(i.size):
        x = _distinct_sorted(elements[offsets[i[t]]:offsets[i[t] + 1]])
        y = _distinct_sorted(elements[offsets[j[t]]:offsets[j[t] + 1]])
        a, b, common = 0, 0, 0
        while a < x.size and b < y.size:
            if x[a] == y[b]:
                common += 1
                a += 1
                b += 1
            elif x[a] < y[b]:
                a += 1
            else:
                b += 1
        union = x.size + y.size - common
        out[t] = 1.0 if union == 0 else common / union
    return out


@nb.njit(nogil=True, cache=True)
def band_keys(codes, bands, rows):
    """featurehash.dedup.candidates.band_keys(codes, bands, rows)[0], bit for bit, in one compiled pass that
    fingerprints only the bands * rows codes the keys read (the rest are for re-ranking, unused here)."""
    n = codes.shape[0]
    keys = np.empty((bands, n), dtype=np.uint64)
    for r in range(n):
        for band in range(bands):
            digest = mix(np.uint64(band) + BAND_SALT)
            for sample in range(rows):
                word = np.uint64(codes[r, band * rows + sample])
                digest = mix(digest ^ (mix(word + FINGERPRINT_SALT) >> np.uint64(32)))
            keys[band, r] = digest
    return keys


def set_join(batches, feature_map, threshold: float, *, target_recall: float, memory_budget, workdir: Path,
             output: Path, progress: bool = False, chunk_rows: int = 8192, block_pairs: int = 1 << 20):
    """(where, figures): the verified pairs among the documents of `batches` ((positions, texts) blocks) written
    to `output` as `similarity_join(output=...)` writes them, (i, j) rows of the join; `where` the position of
    each row (the documents with at least one shingle, in order: a shorter one can only be an exact
    duplicate). The sets go to a file in `workdir`, removed at the end."""
    from ...lsh.banding import choose_bands, collision_probability
    from .stages import bar

    bands, rows = choose_bands(feature_map.spec.n_components, threshold, target_recall)
    keep = math.inf if memory_budget is None else memory_budget / 4
    spill_dir = Path(workdir) / "near-spill"
    spill_dir.mkdir(exist_ok=True)
    sets_path = spill_dir / "sets.u4"
    offsets, fed = [np.zeros(1, dtype=np.int64)], []
    written = 0

    def codes():
        nonlocal written
        with open(sets_path, "wb") as sets_file:
            for positions, texts in batches:
                # a held section sends the passes' chunks to helper threads rather than numpy's OpenBLAS pool,
                # whose threads spin after each pass: measured, 25% more CPU for the same stage
                with held_blas():
                    elements, starts = document_columns(feature_map, texts)
                nonempty = starts[1:] > starts[:-1]
                if not nonempty.all():
                    positions, starts = positions[nonempty], np.concatenate(([0], starts[1:][nonempty]))
                if positions.size == 0:
                    continue
                fed.append(positions)
                elements.tofile(sets_file)
                offsets.append(starts[1:] + written)
                written += int(elements.size)
                with held_blas():
                    batch_codes = feature_map.hash_tokens(elements.astype(np.uint64), starts)
                yield batch_codes

    try:
        hashed = hash_collection(feature_map, bar(codes(), progress, "near: hash"), "x", bands, rows, False, keep,
                                 lambda: spill_dir, keys_of=lambda codes: (band_keys(codes, bands, rows), None))
        keys = hashed.keys
        all_offsets = np.concatenate(offsets)
        elements = (np.memmap(sets_path, dtype=np.uint32, mode="r", shape=(written,)) if written
                    else np.zeros(0, dtype=np.uint32))
        if hashed.spilled:
            spill = BandKeySpill(spill_dir, plan_spill(hashed.n, bands, memory_budget), bands)
            spill.add_all("x", keys, chunk_rows)
            blocks = spill.candidate_blocks(True, _capped(block_pairs, memory_budget),
                                            lambda units: bar(units, progress, "near: partitions"))
        else:
            blocks = _in_memory(keys, _capped(block_pairs, memory_budget))
        sink = pair_output.open_sink(str(output), lambda: spill_dir)
        n_candidates = 0
        try:
            for band, i, j in blocks:
                if band:
                    first = candidates.first_shared_band(keys, keys, band, i, j)
                    i, j = i[first], j[first]
                n_candidates += i.size
                similarity = jaccard_pairs(elements, all_offsets, i, j)
                hit = similarity >= threshold
                sink.add(i[hit], j[hit], similarity[hit])
            count = sink.count
            sink.finish()
        except BaseException:
            sink.abort()
            raise
        del elements, keys, hashed
    finally:
        import shutil

        shutil.rmtree(spill_dir, ignore_errors=True)
    where = np.concatenate(fed) if fed else np.zeros(0, dtype=np.int64)
    figures = {"rows": int(where.size), "bands": bands, "rows_per_band": rows, "candidates": int(n_candidates), "pairs": int(count),
               "recall_at_threshold": float(collision_probability(threshold, bands, rows))}
    return where, figures


def _capped(block_pairs: int, memory_budget) -> int:
    return block_pairs if memory_budget is None else max(1, min(block_pairs, int(memory_budget // _PAIR_WORK)))


def _in_memory(keys: np.ndarray, block_pairs: int):
    for band in range(keys.shape[0]):
        for a, b in candidates.self_pairs(keys[band], block_pairs):
            yield band, a, b
