"""Fourier feature maps: random Fourier features and their spherical, structured and quadrature
variants (rff, nrff, srf, ssf, quadrature) and the chi2 maps, which sample the spectrum of a shift-invariant
kernel after a per-coordinate transform (additive_chi2: deterministic spectrum sampling; skewed_chi2: random
Fourier features of the log-shifted input)."""
