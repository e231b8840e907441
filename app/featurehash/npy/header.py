"""The header of a version 1 or 2 .npy file, read without numpy.load: shared by the service's body
decoder (which views the body's bytes in place) and the client's answer reader (which allocates the
array before the bytes arrive)."""

from __future__ import annotations

import io
import math

import numpy as np

MAGIC = b"\x93NUMPY"
_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def length_field_bytes(head: bytes) -> int | None:
    """Bytes of the header-length field after the 8-byte magic and version: 2 for version 1.0, 4 for
    2.0, None for any other version (`head` holds at least 8 bytes)."""
    return {1: 2, 2: 4}.get(head[6]) if head[7] == 0 else None


def layout(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of a whole version 1 or 2 header (magic to padding); arrays of
    objects are refused, as numpy.load(allow_pickle=False) refuses them, and so are negative dimensions
    (numpy's reader lets them through, and frombuffer/reshape read -1 as "whatever is there")."""
    stream = io.BytesIO(header)
    shape, fortran_order, dtype = _READERS[np.lib.format.read_magic(stream)](stream)
    if dtype.hasobject:
        raise ValueError("arrays of objects are refused (as numpy.load(allow_pickle=False) refuses them)")
    if any(size < 0 for size in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape, fortran_order, dtype


def data_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes of the array data after the header (exact: Python integers do not overflow)."""
    return math.prod(shape) * dtype.itemsize
