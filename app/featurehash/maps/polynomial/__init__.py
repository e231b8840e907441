"""Polynomial and dot-product kernel sketches: Random Maclaurin and TensorSketch over a shared
base (_polynomial_sketch)."""
