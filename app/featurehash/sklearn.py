"""scikit-learn transformers for every featurehash method, in scikit-learn's conventions.

    from sklearn.pipeline import make_pipeline
    from sklearn.linear_model import LogisticRegression
    from featurehash.sklearn import RandomFourierFeatures

    model = make_pipeline(RandomFourierFeatures(n_components=1024, gamma=0.1, random_state=1),
                          LogisticRegression()).fit(X, y)
    model[0].spec_          # the resolved spec: create it in the service to score online

Each estimator is a thin front to `featurehash.create_map`: `fit` learns `n_features_in_`,
builds the spec `{method, input_dim = n_features_in_, n_components, seed = random_state, params}`
(the reweighted quadrature grid also fits its weights to rows of X there) and keeps the resolved
spec in `spec_`; `transform` is the map's transform. So `create_map(est.spec_)`, a service map
created from `est.spec_` (same id), or `featurehash.dask` given `est.spec_` gives the same features.

Conventions, as RBFSampler / PolynomialCountSketch / Nystroem:
- constructor parameters are the spec's parameters under scikit-learn's names (`n_components`,
  `gamma`, `degree`, `coef0`, `kernel`; `random_state` becomes the spec's `seed`: an int is used
  as is, None or a RandomState draws one), validated when `fit` builds the spec (a bad value
  raises `featurehash.SpecError`, a ValueError naming the parameter);
- X is a dense array or a sparse matrix (CSR costs its nonzeros only); float32 input gives
  float32 features, anything else float64;
- one-hot maps (GCWS, binning) return a scipy CSR matrix and also offer `hash(X)` (int64 codes);
- `get_feature_names_out` gives `<classname><i>`, and `set_output(transform="pandas")` works
  for the dense maps.

Text (featurehash.maps.text): `HashingFeatures` is the hashing trick as a stateless transformer, like
HashingVectorizer (`hash="sklearn"` equals it bit for bit), taking documents, token lists or weighted tokens
({token: weight}) and returning CSR; `GCWSFeatures(text={...})` and `RandomBinningFeatures(text={...})` take
the same text, hashed by the spec's front stage (`input: {"hashing": {...}}`, its params in `text`), so
`make_pipeline(GCWSFeatures(text={"ngram_range": (3, 3)}), LinearSVC())` fits on raw documents. Their tags
say string input (scikit-learn then skips its numeric-array checks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from .maps import OneHotFeatures, SpecError, create_map
from .maps.text.analyzers import DEFAULT_TOKEN_PATTERN

__all__ = ["ESTIMATORS", "AdditiveChi2Features", "GCWSFeatures", "HashingFeatures", "NormalizedRandomFourierFeatures",
           "NystroemFeatures", "QuadratureFeatures", "RandomBinningFeatures", "RandomFourierFeatures", "RandomMaclaurinFeatures",
           "SkewedChi2Features", "SphericalRandomFeatures", "SphericalStructuredFeatures", "TensorSketchFeatures"]

FLOAT_DTYPES = (np.float64, np.float32)
_SEED_RANGE = np.iinfo(np.int64).max


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
        return {"method": self._method, "input_dim": X.shape[1], "n_components": _plain(self.n_components),
                "seed": self._seed(), "params": self._params(X)}

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
        X = validate_data(self, X, accept_sparse="csr", dtype=FLOAT_DTYPES)
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
        X = validate_data(self, X, accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
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
        X = validate_data(self, X, accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
        return self.feature_map_.hash(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if getattr(self, "text", None) is not None:
            tags.input_tags.string, tags.input_tags.two_d_array, tags.input_tags.sparse = True, False, False
            tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


class RandomFourierFeatures(_FeatureMapTransformer):
    """Random Fourier features (method "rff"; Rahimi & Recht, NIPS 2007).

    Kernel: Gaussian exp(-gamma ||x - y||^2) (`kernel="gaussian"`), the L1 Laplacian
    exp(-gamma ||x - y||_1) (`kernel="laplacian"`) or Matérn (`kernel="matern"`, smoothness `nu`,
    length 1 / sqrt(2 gamma): scikit-learn's Matern(length_scale=s, nu) is gamma=0.5, lengthscales=s).
    `lengthscales`: per-feature scales (a number or one per feature), dividing X's columns.
    `gamma="scale"` or `"median"`: computed from at most `fit_rows` evenly spaced rows of X and stored.
    `variant` "cos_sin" (n_components / 2 frequencies, lower variance) or "phase" (sqrt(2/D)
    cos(W^T x + b), as RBFSampler). `frequencies` "iid", "orthogonal" or "structured" (Yu et al.,
    NIPS 2016). See `featurehash.maps.fourier.rff`.
    """

    _method = "rff"
    _spec_params = ("kernel", "gamma", "variant", "frequencies", "nu")

    def __init__(self, *, n_components=100, gamma=1.0, kernel="gaussian", variant="cos_sin", frequencies="iid",
                 nu=None, lengthscales=None, fit_rows=2000, random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.kernel = kernel
        self.variant = variant
        self.frequencies = frequencies
        self.nu = nu
        self.lengthscales = lengthscales
        self.fit_rows = fit_rows
        self.random_state = random_state

    def _params(self, X) -> dict[str, Any]:
        params = _with_lengthscales(self, X, super()._params(X))
        if isinstance(self.gamma, str):
            params["fit_sample"] = _evenly_spaced_rows(self, X, minimum=2, purpose="compute gamma from")
        return params


class NormalizedRandomFourierFeatures(_FeatureMapTransformer):
    """Normalized random Fourier features (method "nrff"; Li, KDD 2017).

    Kernel: exp(-gamma (1 - cos(x, y))) on directions; rows are scaled to unit norm (all-zero
    rows are refused) and the features normalised. See `featurehash.maps.fourier.nrff`.
    """

    _method = "nrff"
    _spec_params = ("gamma", "variant", "frequencies")

    def __init__(self, *, n_components=100, gamma=1.0, variant="phase", frequencies="iid", random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.variant = variant
        self.frequencies = frequencies
        self.random_state = random_state


class GCWSFeatures(_OneHotTransformer):
    """Generalized consistent weighted sampling (method "gcws"; Li, KDD 2017).

    Kernel: GMM sum_i min(x~_i, y~_i) / sum_i max(x~_i, y~_i) (pGMM with `power`), x~ splitting
    each entry into its positive and negative part. `n_components` samples; `transform` gives the
    b-bit one-hot features (`bits`) as CSR, n_components << bits columns; `hash` the codes
    (`zero_bit`: of i* only). `sampler` "icws" (O(nnz k)) or "dart" (DartMinHash, O(k log k + nnz),
    the same collision law). `bit_source` "mixed_code": the b bits are seeded uniform bits of each
    sample's code (b-bit match probability GMM + (1 - GMM) 2^-b); "index": the lowest bits of i*, as
    specs made before the parameter. All-zero rows are refused. `text`: see `_OneHotTransformer` (with
    `{"ngram_range": (3, 3), "weighting": "binary"}` and sampler "dart", codes of word 3-shingle sets colliding
    at their Jaccard similarity). See `featurehash.maps.minhash.gcws`.
    """

    _method = "gcws"
    _spec_params = ("power", "bits", "zero_bit", "sampler", "bit_source")

    def __init__(self, *, n_components=100, power=1.0, bits=8, zero_bit=False, sampler="icws",
                 bit_source="mixed_code", text=None, random_state=None):
        self.n_components = n_components
        self.text = text
        self.power = power
        self.bits = bits
        self.zero_bit = zero_bit
        self.sampler = sampler
        self.bit_source = bit_source
        self.random_state = random_state


class SphericalRandomFeatures(_FeatureMapTransformer):
    """Spherical random features (method "srf"; Pennington, Yu & Kumar, NIPS 2015).

    Kernel: (1 - ||x - y||^2 / bias^2)^degree on rows scaled to unit norm, i.e.
    alpha (q + <x, y>)^degree with q = bias^2 / 2 - 1 (all-zero rows are refused). The spectrum
    (spherical shells) is fitted when the spec is built and stored in `spec_`. See `featurehash.maps.fourier.srf`.
    """

    _method = "srf"
    _spec_params = ("degree", "bias", "variant", "frequencies")

    def __init__(self, *, n_components=100, degree=3, bias=4.0, variant="phase", frequencies="iid",
                 random_state=None):
        self.n_components = n_components
        self.degree = degree
        self.bias = bias
        self.variant = variant
        self.frequencies = frequencies
        self.random_state = random_state


class SphericalStructuredFeatures(_FeatureMapTransformer):
    """Spherical structured features (method "ssf"; Lyu, ICML 2017).

    Kernel: Gaussian exp(-gamma ||x - y||^2) (`gamma`, default 1.0) or the arc-cosine kernel of
    order 0, 1, 2 (`kernel="arccos0"` ..., no gamma). `n_components` must be a multiple of 4 and
    at least 4 ceil(n_features / 2). `randomization` "rotation" (a random rotation of the point set:
    unbiased) or "signs" (sign flips only, as specs made before the parameter). See
    `featurehash.maps.fourier.ssf`.
    """

    _method = "ssf"
    _spec_params = ("kernel", "gamma", "randomization")

    def __init__(self, *, n_components=100, kernel="gaussian", gamma=None, randomization="rotation",
                 random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.randomization = randomization
        self.random_state = random_state


class QuadratureFeatures(_FeatureMapTransformer):
    """Gaussian-quadrature features (method "quadrature"; Dao, De Sa & Re, NIPS 2017).

    Kernel: Gaussian exp(-gamma ||x - y||^2), or with `anova` ({"window": r} or {"subsets": [...]})
    the sparse ANOVA kernel. `grid`: "subsampled" (any even n_components), "dense" and "sparse"
    (fixed sizes: the error names the n_components to use; `points_per_dim`, `level`), or
    "reweighted": `fit` fits the weights to `fit_rows` evenly spaced rows of X (at most; the spec
    then stores the fitted points and weights, not the rows). `fit_options` passes the fit's other
    parameters (fit_pairs, candidates, selection, penalty, diagonal_weight). See `featurehash.maps.fourier.quadrature`.
    """

    _method = "quadrature"
    _spec_params = ("grid", "gamma", "points_per_dim", "level", "anova")

    def __init__(self, *, n_components=100, gamma=1.0, grid="subsampled", points_per_dim=None, level=None,
                 anova=None, fit_rows=500, fit_options=None, random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.grid = grid
        self.points_per_dim = points_per_dim
        self.level = level
        self.anova = anova
        self.fit_rows = fit_rows
        self.fit_options = fit_options
        self.random_state = random_state

    def _params(self, X) -> dict[str, Any]:
        params = super()._params(X)
        if self.grid != "reweighted":
            return params
        if X.shape[0] < 2:
            raise ValueError(f"the reweighted grid is fitted to pairs of rows: got 1 sample, need n_samples >= 2 "
                             f"({type(self).__name__})")
        sample = _evenly_spaced_rows(self, X, minimum=2, purpose="fit the weights to")
        return {**params, **(self.fit_options or {}), "fit_sample": sample}


def _with_lengthscales(estimator, X, params: dict[str, Any]) -> dict[str, Any]:
    """params with the estimator's `lengthscales` as the spec's list: a number is repeated per feature."""
    if estimator.lengthscales is not None:
        scales = np.asarray(estimator.lengthscales, dtype=np.float64)
        params["lengthscales"] = (np.full(X.shape[1], float(scales)) if scales.ndim == 0 else scales.ravel()).tolist()
    return params


def _evenly_spaced_rows(estimator, X, *, minimum: int, purpose: str) -> list[list[float]]:
    """At most `estimator.fit_rows` evenly spaced rows of X, as the fit_sample of a spec."""
    fit_rows = _plain(estimator.fit_rows)
    if not isinstance(fit_rows, int) or isinstance(fit_rows, bool) or fit_rows < minimum:
        raise SpecError("fit_rows", f"rows of X to {purpose}: an integer >= {minimum}, got {fit_rows!r} "
                        f"({type(estimator).__name__})")
    rows = np.unique(np.linspace(0, X.shape[0] - 1, min(X.shape[0], fit_rows)).round().astype(int))
    sample = X[rows]
    sample = sample.toarray() if hasattr(sample, "toarray") else sample
    return sample.astype(np.float64).tolist()


class RandomBinningFeatures(_OneHotTransformer):
    """Random binning features (method "binning"; Rahimi & Recht, NIPS 2007).

    Kernel: Laplacian exp(-gamma ||x - y||_1). `n_components` random grids; `transform` gives
    the one-hot features of the lowest `bits` bits of each grid's bin code as CSR
    (n_components << bits columns), `hash` the codes. `text`: see `_OneHotTransformer`. See
    `featurehash.maps.minhash.binning`.
    """

    _method = "binning"
    _spec_params = ("gamma", "bits")

    def __init__(self, *, n_components=100, gamma=1.0, bits=8, text=None, random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.bits = bits
        self.text = text
        self.random_state = random_state


class RandomMaclaurinFeatures(_FeatureMapTransformer):
    """Random Maclaurin features (method "random_maclaurin"; Kar & Karnick, AISTATS 2012).

    Kernel: (coef0 + <x, y>)^degree on the raw rows (a baseline: the variance grows with the
    degree). See `featurehash.maps.polynomial.random_maclaurin`.
    """

    _method = "random_maclaurin"
    _spec_params = ("degree", "coef0")

    def __init__(self, *, n_components=100, degree=3, coef0=1.0, random_state=None):
        self.n_components = n_components
        self.degree = degree
        self.coef0 = coef0
        self.random_state = random_state


class TensorSketchFeatures(_FeatureMapTransformer):
    """TensorSketch (method "tensorsketch"; Pham & Pagh, KDD 2013), as PolynomialCountSketch
    without its gamma.

    Kernel: (coef0 + <x, y>)^degree on the raw rows. See `featurehash.maps.polynomial.tensorsketch`.
    """

    _method = "tensorsketch"
    _spec_params = ("degree", "coef0")

    def __init__(self, *, n_components=100, degree=3, coef0=1.0, random_state=None):
        self.n_components = n_components
        self.degree = degree
        self.coef0 = coef0
        self.random_state = random_state


class NystroemFeatures(_FeatureMapTransformer):
    """Nystroem features (method "nystroem"; Williams & Seeger, NIPS 2001), as scikit-learn's Nystroem.

    Kernel (`kernel`): "gaussian", "laplacian", "chi2" (gamma), "matern" (gamma, nu in 0.5, 1.5, 2.5),
    "polynomial" (gamma, degree, coef0), "gmm" (power), "arccos0" / "arccos1" / "arccos2"; unset
    parameters take the spec's defaults. Gaussian, Laplacian and Matérn take `lengthscales` (a number or
    one per feature) and `gamma="scale"` or `"median"` (computed from the fit rows).
    `fit` chooses n_components landmarks among `fit_rows` evenly spaced rows of X (at most) by
    randomly pivoted Cholesky (`sampling="rpcholesky"`) or uniformly (`"uniform"`), and `spec_`
    stores the landmarks and the normalisation (not the rows). See `featurehash.maps.fitted.nystroem`.
    """

    _method = "nystroem"
    _spec_params = ("kernel", "gamma", "nu", "degree", "coef0", "power", "sampling")

    def __init__(self, *, n_components=100, kernel="gaussian", gamma=None, nu=None, lengthscales=None, degree=None,
                 coef0=None, power=None, sampling="rpcholesky", fit_rows=2000, random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.nu = nu
        self.lengthscales = lengthscales
        self.degree = degree
        self.coef0 = coef0
        self.power = power
        self.sampling = sampling
        self.fit_rows = fit_rows
        self.random_state = random_state

    def _params(self, X) -> dict[str, Any]:
        return {**_with_lengthscales(self, X, super()._params(X)),
                "fit_sample": _evenly_spaced_rows(self, X, minimum=1, purpose="choose landmarks from")}


class AdditiveChi2Features(_FeatureMapTransformer):
    """Additive chi-squared features (method "additive_chi2"; Vedaldi & Zisserman, PAMI 2012), as
    scikit-learn's AdditiveChi2Sampler, to float rounding.

    Kernel: sum_i 2 x_i y_i / (x_i + y_i) on nonnegative X. `sample_steps`, `sample_interval` (default
    0.8, 0.5, 0.4 for 1, 2, 3 steps). No n_components: the output has n_features (2 sample_steps - 1)
    columns; sparse X gives CSR features (O(nnz)). Negative entries raise ValueError, as scikit-learn's.
    The map is deterministic (no random_state). See `featurehash.maps.fourier.additive_chi2`.
    """

    _method = "additive_chi2"
    _spec_params = ("sample_steps", "sample_interval")

    def __init__(self, *, sample_steps=2, sample_interval=None):
        self.sample_steps = sample_steps
        self.sample_interval = sample_interval

    def _spec_request(self, X) -> dict[str, Any]:
        steps = _plain(self.sample_steps)
        width = X.shape[1] * (2 * steps - 1) if isinstance(steps, int) and steps >= 1 else 1
        return {"method": self._method, "input_dim": X.shape[1], "n_components": width, "seed": 0,
                "params": self._params(X)}

    def fit(self, X, y=None):
        """Check X (nonnegative) and build the map for its number of features."""
        super().fit(X, y)
        check_non_negative(validate_data(self, X, accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False),
                           f"{type(self).__name__} (X)")
        return self

    def transform(self, X):
        """The features of X; CSR for sparse X, as AdditiveChi2Sampler."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
        if hasattr(X, "tocsr"):
            return self.feature_map_.transform_sparse(X, dtype=X.dtype)
        return self.feature_map_.transform(X, dtype=X.dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags


class SkewedChi2Features(_FeatureMapTransformer):
    """Random features for the skewed chi-squared kernel (method "skewed_chi2"; Li, Ionescu &
    Sminchisescu, DAGM 2010), as scikit-learn's SkewedChi2Sampler.

    Kernel: prod_i 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2 c), c = `skewedness`; entries must
    be > -c. See `featurehash.maps.fourier.skewed_chi2`.
    """

    _method = "skewed_chi2"
    _spec_params = ("skewedness",)

    def __init__(self, *, n_components=100, skewedness=1.0, random_state=None):
        self.n_components = n_components
        self.skewedness = skewedness
        self.random_state = random_state


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


ESTIMATORS: dict[str, type[_FeatureMapTransformer]] = {cls._method: cls for cls in (
    RandomFourierFeatures, NormalizedRandomFourierFeatures, GCWSFeatures, SphericalRandomFeatures,
    SphericalStructuredFeatures, QuadratureFeatures, RandomBinningFeatures, RandomMaclaurinFeatures,
    TensorSketchFeatures, NystroemFeatures, AdditiveChi2Features, SkewedChi2Features, HashingFeatures)}
