"""scikit-learn transformers for every featurehash method, in scikit-learn's conventions.

    from sklearn.pipeline import make_pipeline
    from sklearn.linear_model import LogisticRegression
    from featurehash.sklearn import RandomFourierFeatures

    model = make_pipeline(RandomFourierFeatures(n_components=1024, gamma=0.1, random_state=1),
                          LogisticRegression()).fit(X, y)
    model[0].spec_          # the resolved spec: create it in the service to score online

One module per family (`fourier`, `minhash`, `polynomial`, `fitted`, `text`) over `_base`; every name
is imported from here, `featurehash.sklearn.X`.

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
- `n_components` any positive int: where the method has only some sizes (cos/sin pairs: even; SSF:
  multiples of 4 from 4 ceil(n_features / 2)), the next size up is used with a UserWarning, as Nystroem
  caps n_components at n_samples (`spec_["n_components"]` is the size used);
- all-zero rows (an empty document after CountVectorizer) pass: the maps that need a nonzero row take
  `empty_rows`, whose default here is the explicit empty result (NRFF, SRF: "zero", the zero feature
  vector; GCWS: "code", the reserved code 2^63 - 1 in every sample), written into the spec as
  `params.empty_rows`; "error" refuses such rows as the spec's default does;
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

from ._base import _FeatureMapTransformer
from .fitted import NystroemFeatures
from .fourier import (AdditiveChi2Features, NormalizedRandomFourierFeatures, QuadratureFeatures, RandomFourierFeatures,
                      SkewedChi2Features, SphericalRandomFeatures, SphericalStructuredFeatures)
from .minhash import GCWSFeatures, MinHashFeatures, RandomBinningFeatures
from .polynomial import RandomMaclaurinFeatures, TensorSketchFeatures
from .text import HashingFeatures

__all__ = ["ESTIMATORS", "AdditiveChi2Features", "GCWSFeatures", "HashingFeatures", "MinHashFeatures",
           "NormalizedRandomFourierFeatures",
           "NystroemFeatures", "QuadratureFeatures", "RandomBinningFeatures", "RandomFourierFeatures", "RandomMaclaurinFeatures",
           "SkewedChi2Features", "SphericalRandomFeatures", "SphericalStructuredFeatures", "TensorSketchFeatures"]

ESTIMATORS: dict[str, type[_FeatureMapTransformer]] = {cls._method: cls for cls in (
    RandomFourierFeatures, NormalizedRandomFourierFeatures, GCWSFeatures, SphericalRandomFeatures,
    SphericalStructuredFeatures, QuadratureFeatures, RandomBinningFeatures, RandomMaclaurinFeatures,
    TensorSketchFeatures, NystroemFeatures, AdditiveChi2Features, SkewedChi2Features, HashingFeatures,
    MinHashFeatures)}

# The public path, not the family module, names each class: in pickles (which then survive a move between
# modules), reprs and the API reference.
for _cls in ESTIMATORS.values():
    _cls.__module__ = __name__
del _cls
