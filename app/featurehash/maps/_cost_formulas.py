"""One cost formula per method (`cost` explains what they are for).

Notation: d = input_dim, D = n_components, z = nonzeros of a row (d for a dense row), F = frequencies (D/2 for
"cos_sin" features, D for "phase"), d' = the power of two >= d, p = degree, lg(x) = log2(max(x, 2)). Unit
prices (`Units`, nanoseconds of one core) were measured by bench/bench_cost_model.py and rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .spec import MapSpec

NS = 1e-9
# scikit-learn's default token pattern, the one the compiled text pass runs; spelled here (and checked equal to
# maps.text.analyzers' by the tests) so that pricing a map does not import the text family.
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@dataclass(frozen=True)
class Units:
    """Nanoseconds of one core per unit of work, rounded up from the bench's measurements."""

    random: float = 45.0          # one random number (raw words, then a law: normal, uniform, Cauchy)
    sign: float = 8.0             # one random sign
    madd: float = 0.08            # a multiply-add of a dense BLAS product (float32, one thread)
    sparse_madd: float = 2.0      # a multiply-add of a sparse (CSR) by dense product
    sparse_row: float = 20e3      # one CSR row's own overhead in a Fourier pass (slicing, unit scaling)
    element: float = 2.0          # one numpy element-wise operation on an output number
    trig: float = 10.0            # one cosine or sine (or exp, log) of a feature, written out
    butterfly: float = 0.5        # one step of a compiled fast Walsh-Hadamard transform (per number and stage)
    fft: float = 1.0              # one point and stage of a real or complex FFT (n lg n of them)
    python_block: float = 20e3    # one block of a Python-level loop (calls, small temporaries)
    table_entry: float = 40.0     # one (coordinate, sample) entry of a GCWS / binning constant table
    sample_step: float = 4.0      # one (nonzero, sample) step of GCWS / binning with a table
    sample_draw: float = 40.0     # the same step with the constants drawn on demand (no table)
    sample_row: float = 60.0      # one sample of one row (its minimum, its code)
    dart_sample: float = 60.0     # one sample and stage (lg D) of the GCWS "dart" sampler
    dart_nonzero: float = 800.0   # one nonzero of a row of the "dart" sampler
    search_term: float = 10.0     # one (candidate, p) term of the SSF index-set search
    nystroem_fit: float = 1.0     # one unit of rows * m * (d + m) of the Nystroem fit (gaussian, polynomial,
    nystroem_fit_portable: float = 20.0  # laplacian, chi2: compiled, 0.23-0.27 measured); arc-cosine, gmm ~10x more
    portable_kernel: float = 12.0  # one (coordinate, landmark) step of a portable (non-BLAS) kernel column
    set_step: float = 0.5         # one (element, sample) step of minhash "k_permutation" (vector lanes; 0.18 measured)
    set_element: float = 5.0      # one element of a minhash "one_permutation" / "circulant" pass (1.5 measured)
    set_sample: float = 10.0      # one sample of one minhash row: densification, its code (~5 measured)
    text_character: float = 160.0  # one character through Python's analyzer (`re`), or of tokens given, per n size
                                  # (93 a character measured for 2-character words, 113 for 1-5 grams, 135 for 1-character tokens)
    text_scan: float = 5.0        # one character of the compiled text pass: decode, case table, token cuts
                                  # (these three fitted to 15-380 ns a character measured: bench_cost_model's text rows)
    text_gram: float = 50.0       # one token or n-gram of the compiled pass: its hash, its column in the row
    text_gram_char: float = 10.0  # one character of a char n-gram re-encoded and hashed (a word n-gram: 5)


U = Units()
FIXED_SECONDS = 2e-4              # per call: validation, dispatch, the first chunk's set-up
SRF_FIT_SECONDS = 0.5             # the shells fit: 0.1-0.21 s measured for any (bias, degree, d)


def lg(x: float) -> float:
    return math.log2(max(x, 2.0))


def padded(d: int) -> int:
    return 1 << max(0, (d - 1).bit_length())


@dataclass(frozen=True)
class Estimate:
    seconds: float
    field: str


def size_field(spec: MapSpec) -> str:
    return "input_dim" if spec.input_dim > spec.n_components else "n_components"


class Formula:
    """A method's costs: `creation(spec)`, and `row(spec, z, sparse)` for one row of z nonzeros."""

    fixed = FIXED_SECONDS

    def creation(self, spec: MapSpec, **options) -> Estimate:
        return Estimate(self.fixed, size_field(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        raise NotImplementedError


class Fourier(Formula):
    """rff, nrff, srf: W (F x d) then cos / sin of D features.

    creation = iid:        F d random
             | orthogonal: 2 F d random + 2 F d^2 madd + F/d blocks
             | structured, d' >= 128: 3 F random + F/d' blocks (+ srf: min(d, d'-d) F 3 lg d' butterflies)
             | structured, d' < 128:  F/d' (blocks (4 + lg d') + 6 d'^2 lg d' element): the dense W
             (+ srf: the shells fit, SRF_FIT_SECONDS, and F random radii)
    row      = z F madd (sparse_madd + sparse_row for CSR) | structured d' >= 128: 3 F lg d' butterflies;
               + D trig + z element
    """

    def frequencies(self, spec: MapSpec) -> int:
        variant = spec.params.get("variant", "cos_sin" if spec.method == "rff" else "phase")
        return spec.n_components // 2 if variant == "cos_sin" else spec.n_components

    def structured_wide(self, spec: MapSpec) -> bool:
        return spec.params.get("frequencies") == "structured" and padded(spec.input_dim) >= 128

    def creation(self, spec: MapSpec, **options) -> Estimate:
        F, d, kind = self.frequencies(spec), spec.input_dim, spec.params.get("frequencies", "iid")
        wide = padded(d)
        if kind == "orthogonal":
            ns = 2 * F * d * U.random + 2 * F * d * d * U.madd + math.ceil(F / d) * U.python_block
        elif self.structured_wide(spec):
            ns = 3 * F * U.random + math.ceil(F / wide) * U.python_block
            if spec.method == "srf" and d != wide:
                ns += min(d, wide - d) * F * 3 * lg(wide) * U.butterfly
        elif kind == "structured":
            ns = math.ceil(F / wide) * ((4 + lg(wide)) * U.python_block + 6 * wide * wide * lg(wide) * U.element)
        else:
            ns = F * d * U.random
        ns += F * U.random    # offsets or radii
        field = "n_components" if kind == "structured" else size_field(spec)
        seconds = ns * NS
        if spec.method == "srf" and not any(spec.params.get(k) for k in ("radii", "weights")):
            field = "params" if SRF_FIT_SECONDS > seconds else field   # the fit (given radii and masses skip it)
            seconds += SRF_FIT_SECONDS
        return Estimate(FIXED_SECONDS + seconds, field)

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        F = self.frequencies(spec)
        if self.structured_wide(spec):
            project = 3 * F * lg(padded(spec.input_dim)) * U.butterfly
        else:
            project = z * F * (U.sparse_madd if sparse else U.madd)
        overhead = U.sparse_row if sparse else 0.0
        return Estimate((project + spec.n_components * U.trig + z * U.element + overhead) * NS, size_field(spec))


class SkewedChi2(Fourier):
    """skewed_chi2: rff "phase" with hyperbolic-secant frequencies on log(x + c), dense input.

    creation = D d random;  row = d D madd + D trig + d trig
    """

    def frequencies(self, spec: MapSpec) -> int:
        return spec.n_components

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        d, D = spec.input_dim, spec.n_components
        return Estimate((d * D * U.madd + D * U.trig + d * U.trig) * NS, size_field(spec))


class Polynomial(Formula):
    """random_maclaurin: p sign matrices (d+1) x D.  creation = p (d+1) D sign;
    row = p (z D madd + 2 D element)."""

    def creation(self, spec: MapSpec, **options) -> Estimate:
        p = spec.params.get("degree", 3)
        ns = p * (spec.input_dim + 1) * spec.n_components * U.sign
        return Estimate(FIXED_SECONDS + ns * NS, self.driver(spec))

    def driver(self, spec: MapSpec) -> str:
        return "params.degree" if spec.params.get("degree", 3) > 3 else size_field(spec)

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        p, D = spec.params.get("degree", 3), spec.n_components
        ns = p * (z * D * (U.sparse_madd if sparse else U.madd) + 2 * D * U.element)
        return Estimate(ns * NS, self.driver(spec))


class TensorSketch(Polynomial):
    """tensorsketch: p count sketches, each one real FFT of D points, multiplied, one inverse FFT.

    creation = p (4 blocks + 2 (d+1) random);  row = p (z sparse_madd + 12 D element + D lg D fft) + D lg D fft
    (12 element: the dense sketch, its spectrum and the product, out of cache at large D)
    """

    def creation(self, spec: MapSpec, **options) -> Estimate:
        p = spec.params.get("degree", 3)
        ns = p * (4 * U.python_block + 2 * (spec.input_dim + 1) * U.random)
        return Estimate(FIXED_SECONDS + ns * NS, self.driver(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        p, D = spec.params.get("degree", 3), spec.n_components
        fft = D * lg(D) * U.fft
        return Estimate((p * (z * U.sparse_madd + 12 * D * U.element + fft) + fft) * NS, self.driver(spec))


class Sampled(Formula):
    """gcws (icws sampler) and binning: k = D samples over the nonzeros, constants from a (coordinate,
    sample) table of c d entries when it fits the table budget (c = 2 for gcws, 1 for binning), else drawn.

    creation = c d D table_entry if the table fits, else D random
    row      = z D (sample_step with a table, sample_draw without) + D sample_row
    gcws "dart" sampler: creation = D random; row = D lg D dart_sample + z dart_nonzero
    """

    # Per call: a batch of more than a few rows wakes the compiled kernels' thread pool (6-8 ms of CPU measured
    # for 16 to 4096 rows, whatever the sizes: its threads spin).
    fixed = 10e-3

    def __init__(self, coordinates_per_input: int):
        self.coordinates = coordinates_per_input

    def uses_table(self, spec: MapSpec, options: dict) -> bool:
        budget = options.get("table_budget_bytes", 256 * 2**20)
        return spec.params.get("sampler") != "dart" and \
            self.coordinates * spec.input_dim * spec.n_components * 16 <= budget

    def creation(self, spec: MapSpec, **options) -> Estimate:
        D = spec.n_components
        entries = self.coordinates * spec.input_dim * D if self.uses_table(spec, options) else 0
        return Estimate(self.fixed + (entries * U.table_entry + D * U.random) * NS, size_field(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        D = spec.n_components
        if spec.params.get("sampler") == "dart":
            return Estimate((D * lg(D) * U.dart_sample + z * U.dart_nonzero) * NS, "n_components")
        step = U.sample_step if self.uses_table(spec, options) else U.sample_draw
        return Estimate((z * D * step + D * U.sample_row) * NS, "n_components")


class SetMinHash(Formula):
    """minhash: k = D samples of a set of z elements.

    creation = D random (keys and probe tables), + 2 d random for "circulant" (its two permutation tables)
    row      = "k_permutation": z D set_step + D sample_row; else z set_element + D set_sample
    """

    def creation(self, spec: MapSpec, **options) -> Estimate:
        D = spec.n_components
        tables = 2 * spec.input_dim if spec.params.get("variant") == "circulant" else 0
        return Estimate(self.fixed + (D + tables) * U.random * NS, size_field(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        D = spec.n_components
        if spec.params.get("variant") == "k_permutation":
            return Estimate((z * D * U.set_step + D * U.set_sample) * NS, "n_components")
        return Estimate((z * U.set_element + D * U.set_sample) * NS, "n_components")


class Quadrature(Formula):
    """quadrature: P = D/2 points of r coordinates each (r = d, or the largest ANOVA subset).

    creation = dense / sparse grids: P r element + P python_block / 64
             | subsampled: P r random
             | reweighted fit (no points yet): 1.5 pairs c^2 madd (the exact Gram) + pairs c (r element / 2 + trig)
               (the design) + c P^2 element (forward)
               or 20 c P^2 element (l1 path), c = candidates, pairs = fit_pairs
    row      = z P madd (sparse_madd for ANOVA or CSR; z <= r P / d for ANOVA) + D trig
    """

    def largest_subset(self, spec: MapSpec) -> int:
        anova = spec.params.get("anova") or None
        if anova is None:
            return spec.input_dim
        if anova.get("window"):
            return min(spec.input_dim, anova["window"])
        return max((len(s) for s in anova.get("subsets") or [[0]]), default=1)

    def creation(self, spec: MapSpec, **options) -> Estimate:
        P, r = spec.n_components // 2, self.largest_subset(spec)
        grid, params = spec.params.get("grid", "subsampled"), spec.params
        if grid == "reweighted" and not params.get("points"):
            forward = params.get("selection") in (None, "forward") and params.get("penalty") is None
            c = params.get("candidates") or min(4096, (8 if forward else 4) * P)
            pairs = params.get("fit_pairs") or 8000
            ns = 1.5 * pairs * c * c * U.madd + pairs * c * (r * U.element / 2 + U.trig) \
                + (1 if forward else 20) * c * P * P * U.element
            field = "params.candidates" if params.get("candidates") else "n_components"
            return Estimate(FIXED_SECONDS + ns * NS, field)
        if grid == "subsampled":
            ns = P * r * U.random
        else:
            ns = P * r * U.element + P / 64 * U.python_block
        return Estimate(FIXED_SECONDS + ns * NS, size_field(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        P = spec.n_components // 2
        anova = bool(spec.params.get("anova"))
        touched = min(z, self.largest_subset(spec)) if anova else z
        project = touched * P * (U.sparse_madd if (sparse or anova) else U.madd)
        return Estimate((project + spec.n_components * U.trig) * NS, size_field(spec))


class Nystroem(Formula):
    """nystroem: m = D landmarks.

    creation = rows m (d + m) nystroem_fit[_portable] (rows = len(fit_sample); 0 for a stored spec) + m^2 element
    row      = z m (madd for gaussian / polynomial, portable_kernel otherwise) + m^2 madd + m trig
    """

    def creation(self, spec: MapSpec, **options) -> Estimate:
        m, d = spec.n_components, spec.input_dim
        sample = spec.params.get("fit_sample")   # a list of rows, or an array (no truth value)
        rows = 0 if sample is None else len(sample)
        fast = spec.params.get("kernel", "gaussian") in ("gaussian", "polynomial", "laplacian", "chi2")
        ns = rows * m * (d + m) * (U.nystroem_fit if fast else U.nystroem_fit_portable) + m * m * U.element
        return Estimate(FIXED_SECONDS + ns * NS, "params.fit_sample" if rows > 4 * m else "n_components")

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        m = spec.n_components
        blas = spec.params.get("kernel", "gaussian") in ("gaussian", "polynomial")
        column = (U.sparse_madd if sparse else U.madd) if blas else U.portable_kernel
        per = max(z, 1) if blas else spec.input_dim   # portable kernels densify
        return Estimate((per * m * column + m * m * U.madd + m * U.trig) * NS, "n_components")


class AdditiveChi2(Formula):
    """additive_chi2: no parameters. creation = the fixed cost; row = z (2 steps - 1) trig + D element."""

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        steps = spec.params.get("sample_steps", 2)
        return Estimate((z * (2 * steps - 1) * U.trig + spec.n_components * U.element) * NS, "input_dim")


class SSF(Formula):
    """ssf: m = ceil(d/2) input pairs, n = D/4 DFT points.

    creation = the index-set search (none for a stored spec): S sweeps of m steps of t terms each, at most
               2^30 terms + one step: t = (n - m + 1) n/2 exact (m (n - m) n/2 <= 2^22), else (s + 1) n/2 + 3n
               (shortlist s = 2 for "until_small_gain", 16 otherwise); S = 12 for "until_small_gain", 30 (the
               most) for "until_unchanged"; search_term each; + 4 n lg n fft for the rotation tables
    row      = 2 n lg n fft + 4 n element + D trig (d <= 64 Gaussian: d 2n madd instead of the FFT)
    """

    def structure(self, spec: MapSpec) -> tuple[int, int]:
        return (spec.input_dim + 1) // 2, max(1, spec.n_components // 4)

    def creation(self, spec: MapSpec, **options) -> Estimate:
        m, n = self.structure(spec)
        ns = 4 * n * lg(n) * U.fft
        if not spec.params.get("index_set"):
            small_gain = spec.params.get("search") == "until_small_gain"
            half = max(1, n // 2)
            exact = m * max(0, n - m) * half <= 2**22
            step = (n - m + 1) * half if exact else ((2 if small_gain else 16) + 1) * half + 3 * n
            sweeps = 12 if small_gain else 30
            terms = min(sweeps * m * step, 2**30 + step)
            ns += terms * U.search_term
        return Estimate(FIXED_SECONDS + ns * NS, size_field(spec))

    def row(self, spec: MapSpec, z: float, sparse: bool = False, **options) -> Estimate:
        m, n = self.structure(spec)
        gaussian = spec.params.get("kernel", "gaussian") == "gaussian"
        if gaussian and spec.input_dim <= 64 and spec.input_dim * 2 * n <= 2**22:
            project = spec.input_dim * 2 * n * U.madd
        else:
            project = 2 * n * lg(n) * U.fft + 4 * n * U.element
        return Estimate((project + spec.n_components * U.trig + spec.input_dim * U.element) * NS, size_field(spec))


class Hashing(Formula):
    """hashing: creation = the fixed cost. row, z = the row's characters (a document's length, or the summed lengths
    of its tokens), N = high - low + 1 n sizes of ngram_range:
    - documents through the compiled pass (`text_input` "documents", a built-in analyzer: word with the default
      pattern, char, char_wb): z (text_scan + g text_gram + c text_gram_char), with per character g = N grams and
      c = sum of n over the n sizes characters hashed for char / char_wb; for word, tokens of >= 2 word characters
      and a separator give at most one token per 3 characters: g = N / 3, c = sum of n / 2 (text_gram_char at
      half price: a word n-gram's bytes are hashed, not re-encoded per character);
    - anything else (a custom token_pattern, token lists, weighted tokens, or an unknown input kind): z N
      text_character (Python's analyzer makes a string per n-gram)."""

    def row(self, spec: MapSpec, z: float, sparse: bool = False, *, text_input: str | None = None,
            **options) -> Estimate:
        params = spec.params
        low, high = params.get("ngram_range", (1, 1))
        sizes, lengths = high - low + 1, (high * (high + 1) - (low - 1) * low) / 2
        analyzer = params.get("analyzer", "word")
        compiled = text_input == "documents" and (analyzer != "word" or params.get("token_pattern") in
                                                  (None, DEFAULT_TOKEN_PATTERN))
        if not compiled:
            return Estimate(z * sizes * U.text_character * NS, "documents")
        if analyzer == "word":
            per_character = U.text_scan + sizes / 3 * U.text_gram + lengths / 2 * U.text_gram_char
        else:
            per_character = U.text_scan + sizes * U.text_gram + lengths * U.text_gram_char
        return Estimate(z * per_character * NS, "documents")


FORMULAS: dict[str, Formula] = {
    "rff": Fourier(), "nrff": Fourier(), "srf": Fourier(), "skewed_chi2": SkewedChi2(),
    "random_maclaurin": Polynomial(), "tensorsketch": TensorSketch(),
    "gcws": Sampled(2), "binning": Sampled(1), "quadrature": Quadrature(), "nystroem": Nystroem(),
    "additive_chi2": AdditiveChi2(), "ssf": SSF(), "hashing": Hashing(),
    "minhash": SetMinHash(),
}
