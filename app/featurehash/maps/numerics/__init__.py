"""The numerical floor every map family stands on: portable math (bit-identical across CPUs),
counter-based randomness, solvers (NNLS, forward selection), row threads. Imports nothing of featurehash
above it."""
