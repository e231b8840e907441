"""The hashing trick as a stateless transformer, like HashingVectorizer."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..maps import SpecError
from ..maps.text.analyzers import DEFAULT_TOKEN_PATTERN
from ._base import FLOAT_DTYPES, _FeatureMapTransformer, _plain, _text_rows


class HashingFeatures(_FeatureMapTransformer):
    """The hashing trick (method "hashing"; Weinberger et al., ICML 2009), a stateless transformer like
    HashingVectorizer: documents (str), token lists or weighted tokens ({token: weight}) -> CSR
    (n_samples, n_components).

    Kernel: <x, y> of the rows' weighted (`weighting` "count", "binary", "sublinear") and normalised (`norm`
    "l2", "l1", None) token vectors, estimated without bias with `alternate_sign`. The analyzer parameters are
    HashingVectorizer's. `hash="sklearn"` gives HashingVectorizer(n_features=n_components, ...)'s matrix bit for
    bit (seed ignored); "murmur3" (default) a seeded hash with even columns at any n_components. No fit is
    needed: the spec follows from the parameters (random_state must be an int, default 0, so that two
    instances with equal parameters agree). `dtype`: of the output (float64 as HashingVectorizer, or float32).
    Cost O(characters) per document, no vocabulary. See `featurehash.maps.text.hashing`.
    """

    _method = "hashing"
    _spec_params = ("analyzer", "ngram_range", "lowercase", "strip_accents", "token_pattern", "weighting", "norm",
                    "alternate_sign", "hash")

    def __init__(self, *, n_components=2**20, analyzer="word", ngram_range=(1, 1), lowercase=True,
                 strip_accents=None, token_pattern=DEFAULT_TOKEN_PATTERN, weighting="count", norm="l2",
                 alternate_sign=True, hash="murmur3", dtype=np.float64, random_state=0):  # noqa: A002 - the spec's name
        self.n_components = n_components
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.token_pattern = token_pattern
        self.weighting = weighting
        self.norm = norm
        self.alternate_sign = alternate_sign
        self.hash = hash
        self.dtype = dtype
        self.random_state = random_state

    def _seed(self) -> Any:
        seed = _plain(self.random_state)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise SpecError("random_state", f"an int: a stateless transformer draws no seed, got {seed!r} "
                                            f"({type(self).__name__})")
        return seed

    def _params(self, X) -> dict[str, Any]:
        params = super()._params(X)
        params["norm"] = "none" if self.norm is None else params["norm"]   # HashingVectorizer's norm=None
        return params

    def _spec_request(self, X=None) -> dict[str, Any]:
        return {"method": self._method, "input_dim": 1, "n_components": _plain(self.n_components),
                "seed": self._seed(), "params": self._params(X)}

    def _output_dtype(self) -> np.dtype:
        dtype = np.dtype(self.dtype)
        if dtype not in FLOAT_DTYPES:
            raise SpecError("dtype", f"float64 or float32, got {dtype} ({type(self).__name__})")
        return dtype

    @property
    def feature_map_(self):
        """The map of the current parameters (stateless: built on first use, rebuilt when they change)."""
        request = self._spec_request()
        cached = getattr(self, "_feature_map", None)
        if cached is None or self._built_from != request:
            self._feature_map, self._built_from = self._create(request), request
        return self._feature_map

    def fit(self, X, y=None):
        """Check the parameters and X (nothing is learned); `spec_` is the resolved spec."""
        _text_rows(X)
        self._output_dtype()
        self.spec_ = self.feature_map_.describe()
        self._n_features_out = self.spec_["output_dim"]
        return self

    def transform(self, X):
        """The hashed features of the documents (token lists, weighted tokens) in X: CSR."""
        return self.feature_map_.transform(_text_rows(X), dtype=self._output_dtype())

    def get_feature_names_out(self, input_features=None):
        """`hashingfeatures<i>` for the n_components columns."""
        self._n_features_out = _plain(self.n_components)
        return super().get_feature_names_out(input_features)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_built_from", None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string, tags.input_tags.two_d_array, tags.input_tags.sparse = True, False, False
        tags.requires_fit = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
