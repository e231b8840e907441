"""How an LSH index keeps each item's vector, for exact re-ranking (featurehash.store.index.handles).

The user picks the encoding when creating the index (`vectors`):

- "none": codes only (the default, and what every index created before this option is);
  candidates are ranked by the match fraction of the k codes.
- "float32": the d values, little-endian float32: 4 d bytes.
- "float16": a float32 scale (the row's largest magnitude) then the d values divided by it
  as float16: 2 d + 4 bytes. Relative error <= 2^-11 for entries within ~6e-5 of the row's
  largest (smaller ones are float16 subnormals, absolute error <= 2^-25 of it), so exact
  similarities move by ~1e-3 at most.
- "sparse": the number of nonzeros (uint32), their column indices (uint32) and values
  (float32): 4 + 8 nnz bytes; for bag-of-words and other sparse data.

Inputs are float64 numpy or scipy CSR (as the map's `check` gives them); `unpack` returns a
float64 CSR matrix for "sparse" and a float64 ndarray otherwise, one row per record, plus the
bytes that follow each vector in its record (the item id).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

VECTOR_STORAGE = ("none", "sparse", "float32", "float16")
_U32 = np.dtype("<u4")
_F32 = np.dtype("<f4")
_F16 = np.dtype("<f2")


class VectorCodec:
    def __init__(self, kind: str, input_dim: int):
        if kind not in VECTOR_STORAGE[1:]:
            raise ValueError(f"vectors must be one of {VECTOR_STORAGE[1:]}, not {kind!r}")
        self.kind = kind
        self.input_dim = input_dim

    @classmethod
    def for_storage(cls, kind: str, input_dim: int) -> "VectorCodec | None":
        return None if kind == "none" else cls(kind, input_dim)

    def pack(self, X) -> list[bytes]:
        """One blob per row of X."""
        if self.kind == "sparse":
            X = sp.csr_matrix(X)
            X.sum_duplicates()
            return [_U32.type(end - start).tobytes() + X.indices[start:end].astype(_U32).tobytes()
                    + X.data[start:end].astype(_F32).tobytes()
                    for start, end in zip(X.indptr[:-1], X.indptr[1:])]
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        if self.kind == "float32":
            raw = np.ascontiguousarray(X, dtype=_F32).tobytes()
            width = 4 * self.input_dim
            return [raw[row * width:(row + 1) * width] for row in range(X.shape[0])]
        scale = np.abs(X).max(axis=1)
        scale[scale == 0] = 1.0
        scaled = (X / scale[:, None]).astype(_F16)
        return [scale[row].astype(_F32).tobytes() + scaled[row].tobytes() for row in range(X.shape[0])]

    def packed_bytes(self, first_word: int) -> int:
        """The bytes of a packed vector whose first 4 bytes read (uint32 LE) `first_word`."""
        if self.kind == "sparse":
            return 4 + 8 * first_word
        return 4 * self.input_dim if self.kind == "float32" else 4 + 2 * self.input_dim

    def unpack(self, blobs: list[bytes]):
        """(vectors (m, d), what follows each vector) of blobs that start with a packed vector."""
        m, d = len(blobs), self.input_dim
        if self.kind == "sparse":
            counts = np.array([int.from_bytes(blob[:4], "little") for blob in blobs], dtype=np.int64)
            ends = 4 + 8 * counts
            indices = np.frombuffer(b"".join(blob[4:4 + 4 * n] for blob, n in zip(blobs, counts)), dtype=_U32)
            values = np.frombuffer(b"".join(blob[4 + 4 * n:end] for blob, n, end in zip(blobs, counts, ends)),
                                   dtype=_F32)
            indptr = np.concatenate([[0], np.cumsum(counts)])
            vectors = sp.csr_matrix((values.astype(np.float64), indices.astype(np.int64), indptr), shape=(m, d))
            return vectors, [blob[end:] for blob, end in zip(blobs, ends)]
        if self.kind == "float32":
            width = 4 * d
            vectors = np.frombuffer(b"".join(blob[:width] for blob in blobs), dtype=_F32).reshape(m, d)
            return vectors.astype(np.float64), [blob[width:] for blob in blobs]
        width = 4 + 2 * d
        scales = np.frombuffer(b"".join(blob[:4] for blob in blobs), dtype=_F32).astype(np.float64)
        scaled = np.frombuffer(b"".join(blob[4:width] for blob in blobs), dtype=_F16).reshape(m, d)
        return scaled.astype(np.float64) * scales[:, None], [blob[width:] for blob in blobs]
