"""The polynomial-kernel sketches: Random Maclaurin and TensorSketch."""

from __future__ import annotations

from ._base import _FeatureMapTransformer


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
