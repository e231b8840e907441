"""The data-fitted transformer: Nystroem features."""

from __future__ import annotations

from typing import Any

from ._base import _evenly_spaced_rows, _FeatureMapTransformer, _with_lengthscales


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
