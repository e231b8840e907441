"""Similarity join of row collections through LSH bands of GCWS / binning codes, verified exactly."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..lsh.banding import choose_bands, collision_probability
from ..lsh.matches import CodePairs
from ..lsh.similarity import ExactPairs, has_exact_similarity, similarity_of
from ..maps.errors import InputError
from ..maps.mapped_pages import mapped_buffers, random_access, release
from ..maps.text import streams
from . import candidates, sources
from . import output as pair_output
from .keys import hash_collection, row_chunks
from .spill import BandKeySpill, plan_spill

# the methods whose codes estimate an exact similarity (featurehash.lsh.similarity's table), for messages
CODE_METHODS = "gcws, minhash, binning"
DEFAULT_CHUNK_ROWS = 8192
DEFAULT_BLOCK_PAIRS = 1 << 20
# bytes of memory per pair of a block while it is verified (indices, gathered keys, similarities, masks)
_PAIR_WORK = 256


@dataclass(frozen=True)
class SimilarPairs:
    """The pairs a join found: `i`, `j` (int64, rows of X and of Y, or of X with i < j) and their
    `similarity` (float64: the exact kernel, or the code estimate with verify="codes"), sorted by
    (i, j). `bands` x `rows` is the banding used, `recall_at_threshold` = 1 - (1 - t^r)^L the chance a
    pair exactly at the threshold became a candidate, `candidates` the number of distinct candidate
    pairs verified, `shape` (rows of X, rows of Y or of X again).

    With `output` the pairs live in that file, in the order found: `path` names it and `count` (len) counts
    them; for .npz, `i`, `j`, `similarity` are read-only memory maps into it (nothing is read until used);
    for .parquet they are None (read the file with pyarrow, or stream it with `blocks`)."""

    i: np.ndarray
    j: np.ndarray
    similarity: np.ndarray
    threshold: float
    bands: int
    rows: int
    recall_at_threshold: float
    candidates: int
    verify: str
    self_join: bool = field(default=True)
    path: str | None = None
    count: int | None = None
    shape: tuple[int, int] | None = None

    def __len__(self) -> int:
        return int(self.count if self.count is not None else self.i.size)

    def blocks(self, block_pairs: int = DEFAULT_BLOCK_PAIRS):
        """(i, j, similarity) in blocks of at most `block_pairs`: from memory, or read from `path`."""
        if self.path is not None:
            yield from pair_output.read_blocks(self.path, block_pairs)
            return
        if self.i is None:
            raise ValueError("these pairs were not kept (they went through a temporary file); pass output=")
        for start in range(0, len(self), block_pairs):
            yield (self.i[start:start + block_pairs], self.j[start:start + block_pairs],
                   self.similarity[start:start + block_pairs])


def similarity_join(X, feature_map, threshold: float, *, Y=None, target_recall: float = 0.95,
                    verify: str = "exact", memory_budget: float | None = None, spill_dir=None, output=None,
                    chunk_rows: int = DEFAULT_CHUNK_ROWS, block_pairs: int = DEFAULT_BLOCK_PAIRS,
                    progress: bool = False) -> SimilarPairs:
    """Every pair of rows whose similarity under the map's kernel is >= `threshold`.

    One collection (Y None): pairs (i, j) of rows of X with i < j. Two: pairs (i, j) of a row i of X
    and a row j of Y. The similarity is the kernel the map's codes estimate (`feature_map.exact_kernel`):
    GMM / pGMM for `gcws` (Li's generalised consistent weighted sampling, after Ioffe's ICWS; a code
    agrees with probability exactly GMM), the Laplacian exp(-gamma ||x - y||_1) for `binning`
    (Rahimi & Recht; a grid's code agrees with exactly that probability).

    Method (minhash banding: Broder 1997; Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets",
    ch. 3.4): the map's k codes are cut into L bands of r codes, (L, r) = `choose_bands(k, threshold,
    target_recall)`, so that a pair of similarity s shares at least one band with probability
    1 - (1 - s^r)^L, which is >= target_recall at s = threshold and larger above it (if no L r <= k
    reaches it, r = 1, L = k is used and `recall_at_threshold` says what it gives). Rows are hashed in
    chunks of `chunk_rows` (memory: L 8-byte keys per row, plus k 4-byte fingerprints with
    verify="codes"; never the features of all rows); each band's keys are grouped by sorting; the
    pairs of a bucket are emitted vectorised, in blocks of `block_pairs`, each pair in the first band
    it shares only, and verified block by block. A bucket of b rows costs b (b - 1) / 2 pair
    verifications (quadratic time for giant buckets such as many identical rows; memory stays a block).

    verify="exact": each candidate's exact kernel, computed from the rows in blocks (dense or sparse):
    precision is 1 and recall is the S-curve's. verify="codes": the fraction of equal codes (for callers
    who cannot keep the vectors; X and Y are then only hashed). That estimate is noisy, standard
    deviation sqrt(s (1 - s) / k), and biased upward for candidates (they share a whole band of r
    codes by construction, about + r (1 - s) / k per shared band): pairs near the threshold are both
    missed and wrongly kept.

    With gcws `zero_bit` the codes keep i* only and agree with probability close to, not exactly, GMM, so
    the S-curve's recall is approximate there. Requires a map with discrete codes ("gcws", "minhash" or
    "binning"; minhash's similarity is the Jaccard of the rows' supports, which its codes match with
    probability exactly). `progress` shows tqdm bars for the hashing and the bands.

    Inputs (`featurehash.dedup.sources`): X and Y may be arrays, sparse matrices, .npy paths (memory-mapped),
    .npz paths (scipy sparse, memory-mapped when saved uncompressed, or one numpy array) or iterables of row
    chunks, read once: with verify="exact" their rows are kept (in memory up to memory_budget / 4 bytes,
    else in files on disk, memory-mapped), with verify="codes" they are only hashed. For a map with a text
    front stage (`spec.input`), X and Y may be lists or iterators of documents, token lists or weighted tokens, or
    .txt / .jsonl paths (`featurehash.maps.text.streams`): they are read and hashed into the map's sparse input
    rows `chunk_rows` at a time, and those rows are kept as an iterable's (under the budget, spilled past it),
    never the whole collection's text or token lists at once; the similarity is the kernel of those rows.

    `memory_budget` (bytes, None: no limit): when a collection's band keys (8 L bytes per row, plus 4 k with
    verify="codes") pass a quarter of it (an eighth each for two collections), they go to a memory-mapped
    file (`featurehash.dedup.keys`) and are then spilled as hash partitions (`featurehash.dedup.spill`:
    planned from n, L and the budget before any is written, grouped one file at a time, the first-shared-band
    rule read from the memory-mapped keys), and pair blocks are capped at memory_budget / 256 pairs. The
    result is the same as without a budget (same pairs, same similarities, same candidate count). The budget
    bounds the join's own memory: rows given in memory count on top, rows from files are memory-mapped (their
    pages are the kernel's to reclaim); with power != 1 a gcws map's exact verification holds t(x) of all
    rows. Temporary files go in `tempfile.mkdtemp(dir=spill_dir)`, removed at the end, also on error.

    `output` (a path ending in .npz or .parquet): the verified pairs are written there block by block as
    found, and the result holds no pairs in memory (`SimilarPairs.path`, `.count`, `.blocks()`).
    """
    method = getattr(feature_map, "method", None)
    if not getattr(feature_map, "has_hash", False) or not has_exact_similarity(feature_map):
        raise InputError("feature_map", f"needs a map with discrete codes ({CODE_METHODS}), got '{method}'")
    if not 0.0 < threshold <= 1.0:
        raise InputError("threshold", "must lie in (0, 1]")
    if verify not in ("exact", "codes"):
        raise InputError("verify", "must be 'exact' or 'codes'")
    if chunk_rows < 1 or block_pairs < 1:
        raise InputError("chunk_rows", "chunk_rows and block_pairs must be positive")
    if memory_budget is not None and not (isinstance(memory_budget, (int, float)) and memory_budget > 0):
        raise InputError("memory_budget", "must be a positive number of bytes, or None")
    output = pair_output.check_output(output)
    self_join = Y is None
    k = feature_map.spec.n_components
    bands, rows = choose_bands(k, threshold, target_recall)
    workdir = _Workdir(spill_dir)
    sink = None
    try:
        keep = math.inf if memory_budget is None else memory_budget / 4
        need_rows = verify == "exact"   # codes need no rows: an iterable is then hashed and forgotten
        collections = {"x": X} if self_join else {"x": X, "y": Y}
        hashed = {}
        for side, given in collections.items():
            given = _text_blocks(feature_map, given, side, chunk_rows)
            source = sources.open_rows(given, side, keep_bytes=keep, workdir=workdir, need_rows=need_rows)
            in_memory = isinstance(given, np.ndarray) and not isinstance(given, np.memmap) or sp.issparse(given)
            if in_memory:   # checked whole, as always; files and iterables chunk by chunk, never copied whole
                source = feature_map.check(source, side)
            collections[side] = source
            chunks = row_chunks(source, chunk_rows) if in_memory else _checked(feature_map, source, side, chunk_rows)
            hashed[side] = hash_collection(feature_map, _bar(chunks, progress, f"hash {side}"), side, bands, rows,
                                           verify == "codes", keep / len(collections), workdir)
        spill = None
        if any(h.spilled for h in hashed.values()):
            spill = BandKeySpill(workdir(), plan_spill(sum(h.n for h in hashed.values()), bands, memory_budget), bands)
            for side, h in hashed.items():
                spill.add_all(side, h.keys, chunk_rows)
        if memory_budget is not None:
            block_pairs = max(1, min(block_pairs, int(memory_budget // _PAIR_WORK)))
        hx, hy = hashed["x"], hashed["x" if self_join else "y"]
        keys_x, keys_y = hx.keys, hy.keys
        score = (ExactPairs(similarity_of(feature_map), collections["x"], None if self_join else collections["y"])
                 if verify == "exact" else CodePairs(hx.prints, None if self_join else hy.prints))
        if spill is not None:
            blocks = spill.candidate_blocks(self_join, block_pairs, lambda units: _bar(units, progress, "partitions"))
        else:
            blocks = _in_memory_blocks(keys_x, keys_y, self_join, block_pairs, progress)
        sink = pair_output.open_sink(output, workdir)
        n_candidates = 0
        mapped_keys = mapped_buffers(keys_x, None if self_join else keys_y)
        random_access(mapped_keys)
        for band, i, j in blocks:
            if band:
                first = candidates.first_shared_band(keys_x, keys_y, band, i, j)
                i, j = i[first], j[first]
                release(mapped_keys)   # spilled keys: the rows a block read, handed back (maps.mapped_pages)
            n_candidates += i.size
            similarity = score(i, j)
            hit = similarity >= threshold
            sink.add(i[hit], j[hit], similarity[hit])
        count = sink.count
        i, j, s = sink.finish()
        sink = None
    finally:
        if sink is not None:
            sink.abort()
        workdir.remove()
    return SimilarPairs(i=i, j=j, similarity=s, threshold=float(threshold), bands=bands, rows=rows,
                        recall_at_threshold=float(collision_probability(threshold, bands, rows)),
                        candidates=n_candidates, verify=verify, self_join=self_join, path=output,
                        count=count, shape=(hx.n, hy.n))


def plan_bands(feature_map, threshold: float, target_recall: float, verify: str) -> tuple[int, int]:
    """The checks of a join of rows given by a spec (the Dask, Spark and Ray joins: errors name `spec` and
    `target_recall`), then its banding (L bands of r codes)."""
    if not has_exact_similarity(feature_map):
        raise InputError("spec", f"needs a map with discrete codes ({CODE_METHODS}), got '{feature_map.method}'")
    if not 0.0 < threshold <= 1.0:
        raise InputError("threshold", "must lie in (0, 1]")
    if not 0.0 < target_recall < 1.0:
        raise InputError("target_recall", "must lie in (0, 1)")
    if verify not in ("exact", "codes"):
        raise InputError("verify", "must be 'exact' or 'codes'")
    return choose_bands(feature_map.spec.n_components, threshold, target_recall)


def _text_blocks(feature_map, given, side: str, chunk_rows: int):
    """A text collection (documents, token lists or weighted tokens: a list, an iterator, or a .txt / .jsonl
    path) as blocks of `chunk_rows` rows hashed by the map's text stage, read as the join consumes them: the
    join then keeps those rows as it keeps any iterable's (inside its budget); anything else as given."""
    stage = feature_map.text_stage
    if stage is None:
        if streams.is_text_file(given):
            raise InputError(os.fspath(given), "a text file needs a spec with a text stage "
                                               "(\"input\": {\"hashing\": {...}})")
        return given
    blocks = streams.text_blocks(stage, given, side, chunk_rows)
    return given if blocks is None else blocks


def _checked(feature_map, source, side: str, chunk_rows: int):
    """Row blocks checked one by one (`feature_map.check`), a problem told with the rows of its block."""
    start = 0
    for chunk in row_chunks(source, chunk_rows):
        try:
            chunk = feature_map.check(chunk, side, first_row=start)
        except InputError as exc:
            raise InputError(side, f"{exc.message} (in the block of rows {start} to {start + chunk.shape[0] - 1})") from None
        start += chunk.shape[0]
        yield chunk


def _in_memory_blocks(keys_x, keys_y, self_join: bool, block_pairs: int, progress: bool):
    for band in _bar(range(keys_x.shape[0]), progress, "bands"):
        blocks = (candidates.self_pairs(keys_x[band], block_pairs) if self_join
                  else candidates.cross_pairs(keys_x[band], keys_y[band], block_pairs))
        for i, j in blocks:
            yield band, i, j


class _Workdir:
    """A temporary directory made on first use (`tempfile.mkdtemp(dir=spill_dir)`), removed by `remove`."""

    def __init__(self, spill_dir):
        self.spill_dir, self.path = spill_dir, None

    def __call__(self) -> Path:
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="featurehash-dedup-", dir=self.spill_dir))
        return self.path

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None


def _bar(iterable, progress: bool, what: str):
    if not progress:
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, desc=f"similarity_join: {what}")
