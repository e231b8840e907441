"""What every featurehash.sklearn transformer shares: the spec built in `fit`, the map behind `transform`,
pickles that carry the spec only, n_components read as the nearest size the method has, and the one-hot
maps' CSR features, `hash` and text input."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..maps import OneHotFeatures, SpecError, create_map
from ..maps.sparse_structure import checked_csr

FLOAT_DTYPES = (np.float64, np.float32)
_SEED_RANGE = np.iinfo(np.int64).max


def sound(X):
    """A sparse X as a CSR matrix of checked structure (InputError naming X, its row and column), before
    scikit-learn's validation converts or indexes it in compiled code; anything else as it is."""
    return checked_csr(X, "X") if sp.issparse(X) else X


def _plain(value: Any) -> Any:
    """numpy scalars (as parameter grids produce them) as the Python numbers a spec holds."""
    return value.item() if isinstance(value, np.generic) else value


class _FeatureMapTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """What every estimator shares; subclasses set `_method`, `_spec_params` and `__init__`."""

    _method: str
    _spec_params: tuple[str, ...] = ()

    # -- the spec ------------------------------------------------------------------

    def _seed(self) -> Any:
        if self.random_state is None or isinstance(self.random_state, np.random.RandomState):
            return int(check_random_state(self.random_state).randint(_SEED_RANGE, dtype=np.int64))
        return _plain(self.random_state)

    def _params(self, X) -> dict[str, Any]:
        values = {name: _plain(getattr(self, name)) for name in self._spec_params}
        return {name: value for name, value in values.items() if value is not None}

    def _spec_request(self, X) -> dict[str, Any]:
        return {"method": self._method, "input_dim": X.shape[1], "n_components": self._size(X.shape[1]),
                "seed": self._seed(), "params": self._params(X)}

    def _size(self, n_features: int) -> Any:
        """n_components, or the nearest size above it that the method has (with a warning, as Nystroem caps
        n_components at n_samples): scikit-learn's checks set n_components = 1, and SSF's smallest size grows
        with n_features. Anything but a positive int is left for the spec to refuse, naming it."""
        n = _plain(self.n_components)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            return n
        size, why = self._valid_size(n, n_features)
        if size != n:
            warnings.warn(f"n_components={n}: {why}; using n_components={size} ({type(self).__name__})",
                          UserWarning, stacklevel=4)
        return size

    def _valid_size(self, n: int, n_features: int) -> tuple[int, str]:
        """(the smallest size >= n the map has for n_features columns, why n is not one)."""
        return n, ""

    def _create(self, request: dict[str, Any]):
        try:
            return create_map(request)
        except SpecError as exc:  # name the estimator's parameter, not the spec's field
            name = {"seed": "random_state", "input_dim": "n_features_in_"}.get(exc.field, exc.field)
            name = "text" + name.removeprefix("input").removeprefix(".hashing") if name.startswith("input") else name
            raise SpecError(name.removeprefix("params."), f"{exc.message} ({type(self).__name__})") from None

    # -- scikit-learn API ----------------------------------------------------------

    def fit(self, X, y=None):
        """Build the map for X's number of features (and, where the method fits data, from X).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        X = validate_data(self, sound(X), accept_sparse="csr", dtype=FLOAT_DTYPES)
        feature_map = self._create(self._spec_request(X))
        self.spec_ = feature_map.describe()
        self._feature_map = feature_map
        self._n_features_out = feature_map.output_dim
        return self

    def transform(self, X):
        """The features of X: ndarray (n_samples, n_features_out), or CSR for one-hot maps.

        float32 X gives float32 features, any other X float64.
        """
        check_is_fitted(self)
        X = validate_data(self, sound(X), accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
        features = self.feature_map_.transform(X, dtype=X.dtype)
        return features.to_csr(dtype=X.dtype) if isinstance(features, OneHotFeatures) else features

    @property
    def feature_map_(self):
        """The fitted map (rebuilt from `spec_` after unpickling: pickles carry the spec only)."""
        check_is_fitted(self)
        if getattr(self, "_feature_map", None) is None:
            self._feature_map = create_map(self.spec_)
        return self._feature_map

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_feature_map", None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _text_rows(X) -> list:
    """A batch of documents (token lists, weighted tokens) as the list the maps read: a list or tuple as is,
    a 1-D array or pandas Series as its items; a single string is refused, as HashingVectorizer does."""
    if isinstance(X, (str, bytes)):
        raise ValueError("Iterable over raw text documents expected, string object received.")
    if isinstance(X, (list, tuple)):
        return X
    if getattr(X, "ndim", 1) != 1:
        raise ValueError(f"expected a 1-D batch of documents, got an array of shape {X.shape}")
    return X.tolist() if hasattr(X, "tolist") else list(X)


class _OneHotTransformer(_FeatureMapTransformer):
    """A map with discrete codes: CSR one-hot features, and `hash`.

    `text`: None (X numeric) or the params of the spec's text front stage (`{}` for its defaults: word
    unigrams, counts, unsigned, no norm; see featurehash.maps.text.stage): X is then a batch of documents,
    token lists or weighted tokens, hashed into 2^30 columns before the map (no n_features_in_).
    """

    def _text_request(self) -> dict[str, Any]:
        if not isinstance(self.text, dict):
            raise SpecError("text", f"None (numeric X) or a dict of hashing params, got {type(self.text).__name__} "
                                    f"({type(self).__name__})")
        params = {key: _plain(value) for key, value in self.text.items()}
        return {"method": self._method, "n_components": _plain(self.n_components), "seed": self._seed(),
                "params": self._params(None), "input": {"hashing": params}}

    def fit(self, X, y=None):
        """Build the map: for X's number of features, or (with `text`) for text input."""
        if self.text is None:
            return super().fit(X, y)
        _text_rows(X)
        feature_map = self._create(self._text_request())
        self.spec_ = feature_map.describe()
        self._feature_map = feature_map
        self._n_features_out = feature_map.output_dim
        return self

    def transform(self, X):
        """CSR one-hot features; with `text`, of the documents in X (float64)."""
        if self.text is None:
            return super().transform(X)
        check_is_fitted(self)
        return self.feature_map_.transform(_text_rows(X), dtype=np.float64).to_csr(dtype=np.float64)

    def hash(self, X) -> np.ndarray:
        """int64 codes (n_samples, n_components): equal code <=> equal sample."""
        check_is_fitted(self)
        if self.text is not None:
            return self.feature_map_.hash(_text_rows(X))
        X = validate_data(self, sound(X), accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
        return self.feature_map_.hash(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if getattr(self, "text", None) is not None:
            tags.input_tags.string, tags.input_tags.two_d_array, tags.input_tags.sparse = True, False, False
            tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


def _with_lengthscales(estimator, X, params: dict[str, Any]) -> dict[str, Any]:
    """params with the estimator's `lengthscales` as the spec's list: a number is repeated per feature."""
    if estimator.lengthscales is not None:
        scales = np.asarray(estimator.lengthscales, dtype=np.float64)
        params["lengthscales"] = (np.full(X.shape[1], float(scales)) if scales.ndim == 0 else scales.ravel()).tolist()
    return params


def _evenly_spaced_rows(estimator, X, *, minimum: int, purpose: str) -> np.ndarray:
    """At most `estimator.fit_rows` evenly spaced rows of X, as the fit_sample of a spec: a float64 array
    (the spec takes one as it is, without a round trip through lists; its id is that of the same rows as
    lists)."""
    fit_rows = _plain(estimator.fit_rows)
    if not isinstance(fit_rows, int) or isinstance(fit_rows, bool) or fit_rows < minimum:
        raise SpecError("fit_rows", f"rows of X to {purpose}: an integer >= {minimum}, got {fit_rows!r} "
                        f"({type(estimator).__name__})")
    rows = np.unique(np.linspace(0, X.shape[0] - 1, min(X.shape[0], fit_rows)).round().astype(int))
    sample = X[rows]
    sample = sample.toarray() if hasattr(sample, "toarray") else sample
    return np.ascontiguousarray(sample, dtype=np.float64)
