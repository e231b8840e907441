"""Weighted minhash and binning: discrete codes (GCWS, its dart sampler, random binning) with their
compiled kernels."""
