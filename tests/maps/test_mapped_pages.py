"""featurehash.maps.mapped_pages: the mappings under arrays and matrices found, their pages handed back without a
value changing."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps.mapped_pages import mapped_buffers, random_access, release


def _mapped(path, values: np.ndarray) -> np.memmap:
    values.tofile(path)
    return np.memmap(path, dtype=values.dtype, mode="r", shape=values.shape)


def _resident_file_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile"))


def test_mappings_are_found_under_views_and_csr_arrays_once_each(tmp_path):
    data = _mapped(tmp_path / "data", np.arange(12, dtype=np.float64))
    indices = _mapped(tmp_path / "indices", np.arange(12, dtype=np.int32) % 4)
    matrix = sp.csr_matrix((data, indices, np.arange(0, 13, 3)), shape=(4, 4), copy=False)
    assert len(mapped_buffers(data.reshape(3, 4).T)) == 1
    assert len(mapped_buffers(matrix, matrix, None)) == 2   # data and indices; indptr is in memory
    assert mapped_buffers(np.arange(5), sp.random(3, 3, density=0.5, format="csr")) == []


def test_released_pages_read_back_the_same_values(tmp_path):
    values = np.random.default_rng(3).random(1 << 16)
    mapped = _mapped(tmp_path / "values", values)
    buffers = mapped_buffers(mapped)
    random_access(buffers)
    before = mapped.copy()
    release(buffers)
    release(mapped_buffers(np.arange(3)))   # nothing mapped: nothing done
    assert np.array_equal(mapped, before) and np.array_equal(mapped, values)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssFile is Linux's /proc/self/status")
def test_release_takes_a_read_file_out_of_this_process_s_resident_pages(tmp_path):
    mapped = _mapped(tmp_path / "big", np.ones(1 << 23))   # 64 MiB
    float(mapped.sum())
    read = _resident_file_kib()
    release(mapped_buffers(mapped))
    assert _resident_file_kib() < read - 32 * 1024
