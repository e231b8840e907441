"""Resident pages of memory-mapped arrays handed back to the kernel while a pass reads them block by block.

A pass over a memory-mapped file (rows spilled by a join, band keys past the budget, an .npy given as a path)
leaves every page it touched mapped into the process: they count in its RSS until the mapping goes, so reading a
1 GB file once made the process 1 GB larger however small its blocks were. `release(buffers)` after each block
drops them from this process's page tables (madvise MADV_DONTNEED on a read-only shared mapping): the pages stay
in the page cache, a later read maps them again without disk I/O, and no byte read can change (the mapping is
of the file, never private). Arrays that are not memory-mapped are left alone.
"""

from __future__ import annotations

import mmap

import numpy as np
import scipy.sparse as sp

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_RANDOM = getattr(mmap, "MADV_RANDOM", None)
# pairs of rows per block when rows are read at random from mapped files: a page fault maps the 64 KB around it
# (the kernel's fault-around, which MADV_RANDOM does not turn off on recent kernels), so a pair's two rows map up
# to 2 x 2 arrays x 64 KB: 256 pairs keep ~64 MB resident before the block is released (measured: blocks of 46,000
# pairs left a 1 GB file of rows wholly resident)
MAPPED_BLOCK_PAIRS = 256


def _mapping(array):
    """The mmap.mmap under a numpy array (a np.memmap or a view of one), else None."""
    seen = 0
    while array is not None and seen < 64:
        if isinstance(array, mmap.mmap):
            return array
        found = getattr(array, "_mmap", None)
        if isinstance(found, mmap.mmap):
            return found
        array = getattr(array, "base", None)
        seen += 1
    return None


def mapped_buffers(*matrices) -> list:
    """The distinct read-only mappings under the arrays of these matrices (dense arrays, CSR matrices, None)."""
    found = []
    for matrix in matrices:
        if matrix is None:
            continue
        arrays = (matrix.data, matrix.indices, matrix.indptr) if sp.issparse(matrix) else (matrix,)
        for array in arrays:
            mapping = _mapping(array) if isinstance(array, np.ndarray) else None
            if mapping is not None and not any(mapping is other for other in found):
                found.append(mapping)
    return found


def random_access(buffers: list) -> None:
    """Tell the kernel these mappings are read at random (madvise MADV_RANDOM): a fault then maps the one page
    read and no read-ahead window (the fault-around stays). Sequential passes (`row_chunks`) come first and keep
    the default."""
    _advise(buffers, _RANDOM)


def release(buffers: list) -> None:
    """Drop the resident pages of these mappings from this process (they are read again on demand)."""
    _advise(buffers, _DONTNEED)


def _advise(buffers: list, advice) -> None:
    if advice is None:
        return
    for mapping in buffers:
        try:
            mapping.madvise(advice)
        except (OSError, ValueError):   # a closed mapping, or a kernel refusing: only memory is at stake
            pass
