"""An .npy answer read from the pieces it arrives in straight into its array.

The header comes first and gives the shape and dtype, so the array is allocated once and every later
byte is copied into it where it belongs: no list of pieces joined into a body, and no numpy.load
copying that body again (for a 64 MiB answer, two passes over memory fewer). Headers other than
versions 1 and 2, or arrays of objects, are refused as numpy.load(allow_pickle=False) would refuse them.
A reader that knows what the array must be passes `check`, which sees the header's shape and dtype before
anything is allocated (a header may announce any size).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .header import MAGIC, layout, length_field_bytes


class NpyAnswer:
    """Feed it the pieces of an .npy body in order (`add`), then take the array (`array`). `check(shape, dtype)`,
    when given, is called with the header's layout before the array is allocated and raises to refuse it."""

    def __init__(self, check: Callable[[tuple[int, ...], np.dtype], None] | None = None) -> None:
        self._check = check
        self._head = bytearray()
        self._array: np.ndarray | None = None
        self._view: memoryview | None = None
        self._filled = 0

    def add(self, piece: bytes) -> None:
        if self._view is None:
            self._head += piece
            if (header_end := self._header_end()) is None:
                return
            self._allocate(bytes(self._head[:header_end]))
            piece, self._head = bytes(self._head[header_end:]), bytearray()
        end = self._filled + len(piece)
        if end > len(self._view):
            raise ValueError(f"the .npy answer holds more than the {len(self._view)} bytes its header announced")
        self._view[self._filled:end] = piece
        self._filled = end

    def array(self) -> np.ndarray:
        if self._view is None or self._filled != len(self._view):
            raise ValueError("the .npy answer ended before the array its header announced")
        return self._array

    def _header_end(self) -> int | None:
        head = self._head
        if len(head) >= len(MAGIC) and not head.startswith(MAGIC):
            raise ValueError("not an .npy answer (no NPY magic)")
        if len(head) < 8:
            return None
        size_bytes = length_field_bytes(head)
        if size_bytes is None:
            raise ValueError(f"unsupported .npy version {head[6]}.{head[7]}")
        if len(head) < 8 + size_bytes:
            return None
        end = 8 + size_bytes + int.from_bytes(head[8:8 + size_bytes], "little")
        return end if len(head) >= end else None

    def _allocate(self, header: bytes) -> None:
        shape, fortran_order, dtype = layout(header)
        if self._check is not None:
            self._check(shape, dtype)
        self._array = np.empty(shape, dtype=dtype, order="F" if fortran_order else "C")
        self._view = memoryview(self._array.reshape(-1, order="A").view(np.uint8))
