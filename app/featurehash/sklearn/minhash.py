"""The transformers with discrete codes: set minhash, GCWS and random binning (CSR one-hot features and `hash`)."""

from __future__ import annotations

from ._base import _OneHotTransformer


class MinHashFeatures(_OneHotTransformer):
    """Minwise hashing of plain sets (method "minhash"; Broder 1997; C-MinHash, Li & Li ICML 2022; one permutation
    with optimal densification, Shrivastava ICML 2017).

    Kernel: Jaccard |A ∩ B| / |A ∪ B| of the rows' sets of nonzero columns (or, with `text`, of a document's
    hashed tokens or shingles). `n_components` codes; `transform` gives their b-bit one-hot features (`bits`) as
    CSR, n_components << bits columns; `hash` the codes. `variant`: "one_permutation" (O(|A| + k)),
    "k_permutation" (k seeded permutations) or "circulant" (one permutation of `input_dim` <= 2^24 columns, shifted).
    `empty_rows`: as GCWSFeatures. See `featurehash.maps.minhash.minhash`.
    """

    _method = "minhash"
    _spec_params = ("variant", "bits", "code_bits", "empty_rows")

    def __init__(self, *, n_components=100, variant="one_permutation", bits=8, code_bits=None, empty_rows="code",
                 text=None, random_state=None):
        self.n_components = n_components
        self.variant = variant
        self.bits = bits
        self.code_bits = code_bits
        self.empty_rows = empty_rows
        self.text = text
        self.random_state = random_state


class GCWSFeatures(_OneHotTransformer):
    """Generalized consistent weighted sampling (method "gcws"; Li, KDD 2017).

    Kernel: GMM sum_i min(x~_i, y~_i) / sum_i max(x~_i, y~_i) (pGMM with `power`), x~ splitting
    each entry into its positive and negative part. `n_components` samples; `transform` gives the
    b-bit one-hot features (`bits`) as CSR, n_components << bits columns; `hash` the codes
    (`zero_bit`: of i* only). `sampler` "icws" (O(nnz k)) or "dart" (DartMinHash, O(k log k + nnz),
    the same collision law). `bit_source` "mixed_code": the b bits are seeded uniform bits of each
    sample's code (b-bit match probability GMM + (1 - GMM) 2^-b); "index": the lowest bits of i*, as
    specs made before the parameter.

    An all-zero row (an empty document of a CountVectorizer, say) has no entry to sample: `empty_rows="code"`
    (the default here, so that a pipeline's empty rows pass) gives it the reserved code 2^63 - 1 in every
    sample, which no real row's code takes (so its GMM estimate with any nonempty row is 0, and 1 with another
    empty row, as the exact kernel's GMM(0, 0) = 1: two empty rows are duplicates of each other); "error"
    refuses it, as the spec's default does. `text`: see `_OneHotTransformer` (with
    `{"ngram_range": (3, 3), "weighting": "binary"}` and sampler "dart", codes of word 3-shingle sets colliding
    at their Jaccard similarity). See `featurehash.maps.minhash.gcws`.
    """

    _method = "gcws"
    _spec_params = ("power", "bits", "zero_bit", "sampler", "bit_source", "empty_rows")

    def __init__(self, *, n_components=100, power=1.0, bits=8, zero_bit=False, sampler="icws",
                 bit_source="mixed_code", empty_rows="code", text=None, random_state=None):
        self.n_components = n_components
        self.text = text
        self.power = power
        self.bits = bits
        self.zero_bit = zero_bit
        self.sampler = sampler
        self.bit_source = bit_source
        self.empty_rows = empty_rows
        self.random_state = random_state


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
