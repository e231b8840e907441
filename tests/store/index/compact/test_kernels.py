"""The compiled client steps of a layout-3 query (featurehash.store.index.compact.kernels) against the numpy they
replace: the same fingerprint bits, bucket identities, bucket addresses, tail positions and pool rows, for
random inputs (no Redis; the query's end-to-end equality with layout 2 is in test_steps.py)."""

from __future__ import annotations

import numpy as np
import pytest

from featurehash.lsh.banding import band_digests, code_fingerprints
from featurehash.store.index.compact.keys import FINGERPRINT_BITS, CompactLayout
from featurehash.store.index.compact.kernels import (TAIL_FIXED, TAIL_ID_ONLY, TAIL_SPARSE, merged_by_number,
                                                   query_plan, rows_of, tail_positions)
from featurehash.store.lsh_layout import IndexConfig


def config(bands: int, rows: int, forest_rows: tuple[int, ...], expected_items: int) -> IndexConfig:
    return IndexConfig(name="k", map_spec={"id": "m"}, n_codes=64, bands=bands, rows=rows, threshold=0.5,
                       recall_at_threshold=0.9, bands_chosen_by="request", forest_rows=forest_rows, layout=3,
                       expected_items=expected_items)


@pytest.mark.parametrize("bands, rows, levels", [(16, 4, [4]), (9, 7, [7, 5, 2]), (1, 64, [64, 1])])
def test_query_plan_is_the_fingerprints_low_bits_and_the_band_digests(bands, rows, levels):
    codes = np.random.default_rng(bands).integers(-2**63, 2**63 - 1, (4, 64), dtype=np.int64)  # negative too
    low, identities = query_plan(codes, bands, rows, np.array(levels, np.int64), FINGERPRINT_BITS)
    fingerprints = code_fingerprints(codes)
    np.testing.assert_array_equal(low, (fingerprints & np.uint32(255)).astype(np.uint8))
    digests = np.hstack([band_digests(fingerprints, bands, rows, None if level == 0 else prefix)
                         for level, prefix in enumerate(levels)])
    np.testing.assert_array_equal(identities, (digests >> np.uint64(32)).astype(np.uint32))


@pytest.mark.parametrize("expected_items", [1, 5_000, 10**9])  # 0, 12 and 24 partition bits
def test_probe_addresses_are_the_write_paths_addresses(expected_items):
    """What a query probes is where a write filed the bucket: CompactLayout._addresses of (level, identity)."""
    layout = CompactLayout(b"p:", config(6, 4, (2, 1), expected_items))
    identities = np.random.default_rng(expected_items).integers(0, 2**32, (5, 18), dtype=np.int64).astype(np.uint32)
    identities[0, :3] = [0, 2**32 - 1, 2**31]
    rows, levels = np.array([0, 2, 3, 4], np.int64), np.array([0, 2, 1, 0], np.int64)
    keys = np.concatenate([(np.uint64(level) << np.uint64(32)) | identities[row, level * 6:(level + 1) * 6]
                           .astype(np.uint64) for row, level in zip(rows, levels)])
    assert layout.probe_addresses(identities, rows, levels) == layout._addresses(keys).tobytes()


def padded_tails(rng, kind: str, count: int, d: int = 5) -> tuple[list[bytes], list[bytes]]:
    """Tails as PROBE_FETCH returns them (vector then id; '' for an item gone), unpadded and padded."""
    tails = []
    for i in range(count):
        if i % 4 == 3:
            tails.append(b"")
            continue
        item_id = f"id-{i}".encode() * (1 + i % 3)
        if kind == "sparse":
            nnz = int(rng.integers(0, 4))
            vector = np.uint32(nnz).tobytes() + rng.integers(0, 99, nnz).astype("<u4").tobytes() \
                + rng.random(nnz).astype("<f4").tobytes()
        else:
            vector = {"none": b"", "float32": rng.random(d).astype("<f4").tobytes(),
                      "float16": np.float32(2.0).tobytes() + rng.random(d).astype("<f2").tobytes()}[kind]
        tails.append(vector + item_id)
    return tails, [tail + b"\0" * (-len(tail) % 4) for tail in tails]


@pytest.mark.parametrize("kind, code, fixed", [("none", TAIL_ID_ONLY, 0), ("sparse", TAIL_SPARSE, 0),
                                               ("float32", TAIL_FIXED, 20), ("float16", TAIL_FIXED, 14)])
def test_tail_positions_locate_each_live_vector_and_id(kind, code, fixed):
    rng = np.random.default_rng(len(kind))
    earlier, _ = padded_tails(rng, kind, 3)
    base_blob = b"".join(tail + b"\0" * (-len(tail) % 4) for tail in earlier)
    tails, padded = padded_tails(rng, kind, 11)
    blob = base_blob + b"".join(padded)
    numbers = rng.permutation(100)[:11].astype(np.int64)
    lengths = np.array([len(tail) for tail in tails], np.int64)
    kept, starts, ends, id_starts = tail_positions(np.frombuffer(blob, "<u4"), len(base_blob) // 4, lengths,
                                                   numbers, code, fixed)
    live = [i for i, tail in enumerate(tails) if tail]
    assert kept.tolist() == numbers[live].tolist()
    for i, start, end, id_start in zip(live, starts, ends, id_starts):
        assert blob[4 * start:end] == tails[i]
        assert blob[id_start:end].startswith(b"id-")
        vector = tails[i][:len(tails[i]) - (end - id_start)]
        if kind == "sparse":
            assert len(vector) == 4 + 8 * int.from_bytes(vector[:4], "little")
        else:
            assert len(vector) == fixed


def test_pools_merge_by_number_and_rows_keep_the_held_numbers():
    rng = np.random.default_rng(5)
    first, more = rng.permutation(50)[:20].astype(np.int64), np.arange(50, 60, dtype=np.int64)[::-1].copy()
    parts = [rng.integers(0, 999, 20) for _ in range(3)]
    more_parts = [rng.integers(0, 999, 10) for _ in range(3)]
    numbers, starts, ends, id_starts, order = merged_by_number(first, *parts, more, *more_parts)
    expected = np.argsort(np.concatenate([first, more]), kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(numbers, np.concatenate([first, more])[expected])
    for merged, a, b in zip((starts, ends, id_starts), parts, more_parts):
        np.testing.assert_array_equal(merged, np.concatenate([a, b])[expected])
    wanted = np.unique(rng.integers(0, 70, 30))
    reference = np.searchsorted(numbers, wanted)
    inside = reference < numbers.size
    reference = reference[inside][numbers[reference[inside]] == wanted[inside]]
    np.testing.assert_array_equal(rows_of(numbers, wanted), reference)
    assert rows_of(numbers, np.empty(0, np.int64)).size == 0 and rows_of(np.empty(0, np.int64), wanted).size == 0
