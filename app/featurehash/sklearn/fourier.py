"""The Fourier-feature transformers: RFF, NRFF, SRF, SSF, Gaussian quadrature and both chi2 maps."""

from __future__ import annotations

from typing import Any

from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from ._base import FLOAT_DTYPES, _evenly_spaced_rows, _FeatureMapTransformer, _plain, _with_lengthscales, sound


class _PairedFeatures(_FeatureMapTransformer):
    """RFF-shaped maps: variant "cos_sin" gives a cos and a sin feature per frequency (an even size)."""

    def _valid_size(self, n: int, n_features: int) -> tuple[int, str]:
        if self.variant == "cos_sin" and n % 2:
            return n + 1, "variant 'cos_sin' pairs cos and sin features (an even n_components)"
        return n, ""


class RandomFourierFeatures(_PairedFeatures):
    """Random Fourier features (method "rff"; Rahimi & Recht, NIPS 2007).

    Kernel: Gaussian exp(-gamma ||x - y||^2) (`kernel="gaussian"`), the L1 Laplacian
    exp(-gamma ||x - y||_1) (`kernel="laplacian"`) or Matérn (`kernel="matern"`, smoothness `nu`,
    length 1 / sqrt(2 gamma): scikit-learn's Matern(length_scale=s, nu) is gamma=0.5, lengthscales=s).
    `lengthscales`: per-feature scales (a number or one per feature), dividing X's columns.
    `gamma="scale"` or `"median"`: computed from at most `fit_rows` evenly spaced rows of X and stored.
    `variant` "cos_sin" (n_components / 2 frequencies, lower variance; an odd n_components is raised to the
    next even one, with a warning) or "phase" (sqrt(2/D) cos(W^T x + b), as RBFSampler). `frequencies`
    "iid", "orthogonal" or "structured" (Yu et al., NIPS 2016). See `featurehash.maps.fourier.rff`.
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


class NormalizedRandomFourierFeatures(_PairedFeatures):
    """Normalized random Fourier features (method "nrff"; Li, KDD 2017).

    Kernel: exp(-gamma (1 - cos(x, y))) on directions; rows are scaled to unit norm and the features
    normalised. An all-zero row has no direction: `empty_rows="zero"` (the default here, so that a
    pipeline's empty rows pass) gives it the zero feature vector (kernel estimate 0 with every row),
    "error" refuses it, as the spec's default does. See `featurehash.maps.fourier.nrff`.
    """

    _method = "nrff"
    _spec_params = ("gamma", "variant", "frequencies", "empty_rows")

    def __init__(self, *, n_components=100, gamma=1.0, variant="phase", frequencies="iid", empty_rows="zero",
                 random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.variant = variant
        self.frequencies = frequencies
        self.empty_rows = empty_rows
        self.random_state = random_state


class SphericalRandomFeatures(_PairedFeatures):
    """Spherical random features (method "srf"; Pennington, Yu & Kumar, NIPS 2015).

    Kernel: (1 - ||x - y||^2 / bias^2)^degree on rows scaled to unit norm, i.e.
    alpha (q + <x, y>)^degree with q = bias^2 / 2 - 1. An all-zero row has no direction: `empty_rows`
    as for NormalizedRandomFourierFeatures ("zero" by default here). The spectrum (spherical shells) is
    fitted when the spec is built and stored in `spec_`. See `featurehash.maps.fourier.srf`.
    """

    _method = "srf"
    _spec_params = ("degree", "bias", "variant", "frequencies", "empty_rows")

    def __init__(self, *, n_components=100, degree=3, bias=4.0, variant="phase", frequencies="iid",
                 empty_rows="zero", random_state=None):
        self.n_components = n_components
        self.degree = degree
        self.bias = bias
        self.variant = variant
        self.frequencies = frequencies
        self.empty_rows = empty_rows
        self.random_state = random_state


class SphericalStructuredFeatures(_FeatureMapTransformer):
    """Spherical structured features (method "ssf"; Lyu, ICML 2017).

    Kernel: Gaussian exp(-gamma ||x - y||^2) (`gamma`, default 1.0) or the arc-cosine kernel of
    order 0, 1, 2 (`kernel="arccos0"` ..., no gamma). The map's sizes are the multiples of 4 from
    4 ceil(n_features / 2) up: another n_components is raised to the next of them, with a warning.
    `randomization` "rotation" (a random rotation of the point set: unbiased) or "signs" (sign flips
    only, as specs made before the parameter). See `featurehash.maps.fourier.ssf`.
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

    def _valid_size(self, n: int, n_features: int) -> tuple[int, str]:
        smallest = 4 * -(-n_features // 2)
        size = max(smallest, 4 * -(-n // 4))
        return size, (f"SSF gives 4 features per DFT column, at least {smallest // 4} columns for {n_features} "
                      f"features (a multiple of 4, >= {smallest})")


class QuadratureFeatures(_FeatureMapTransformer):
    """Gaussian-quadrature features (method "quadrature"; Dao, De Sa & Re, NIPS 2017).

    Kernel: Gaussian exp(-gamma ||x - y||^2), or with `anova` ({"window": r} or {"subsets": [...]})
    the sparse ANOVA kernel. `grid`: "subsampled" (any even n_components: an odd one is raised to the
    next, with a warning), "dense" and "sparse" (fixed sizes: the error names the n_components to use;
    `points_per_dim`, `level`), or "reweighted" (even sizes too): `fit` fits the weights to `fit_rows`
    evenly spaced rows of X (at most; the spec then stores the fitted points and weights, not the rows).
    `fit_options` passes the fit's other parameters (fit_pairs, candidates, selection, penalty,
    diagonal_weight). See `featurehash.maps.fourier.quadrature`.
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

    def _valid_size(self, n: int, n_features: int) -> tuple[int, str]:
        if self.grid in ("subsampled", "reweighted") and n % 2:
            return n + 1, f"the {self.grid} grid gives 2 features (cos and sin) per point (an even n_components)"
        return n, ""

    def _params(self, X) -> dict[str, Any]:
        params = super()._params(X)
        if self.grid != "reweighted":
            return params
        if X.shape[0] < 2:
            raise ValueError(f"the reweighted grid is fitted to pairs of rows: got 1 sample, need n_samples >= 2 "
                             f"({type(self).__name__})")
        sample = _evenly_spaced_rows(self, X, minimum=2, purpose="fit the weights to")
        return {**params, **(self.fit_options or {}), "fit_sample": sample}


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
        check_non_negative(validate_data(self, sound(X), accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False),
                           f"{type(self).__name__} (X)")
        return self

    def transform(self, X):
        """The features of X; CSR for sparse X, as AdditiveChi2Sampler."""
        check_is_fitted(self)
        X = validate_data(self, sound(X), accept_sparse="csr", dtype=FLOAT_DTYPES, reset=False)
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
    be > -c (`transform` refuses others, as SkewedChi2Sampler does; `fit` accepts any X, since the domain
    is not "positive only", which scikit-learn's tags would make `fit` enforce). See
    `featurehash.maps.fourier.skewed_chi2`.
    """

    _method = "skewed_chi2"
    _spec_params = ("skewedness",)

    def __init__(self, *, n_components=100, skewedness=1.0, random_state=None):
        self.n_components = n_components
        self.skewedness = skewedness
        self.random_state = random_state
