"""Real text shipped in packages, for the text tests and bench/bench_text.py: scikit-learn's data set descriptions
and the docstrings of a few standard-library modules (hundreds of documents with accents, digits, punctuation,
code), the same on every machine with the same versions."""

from __future__ import annotations

import glob
import os


def real_corpus() -> list[str]:
    import argparse, collections, email.message, json, pathlib, subprocess  # noqa: E401
    import sklearn
    described = [open(path, encoding="utf-8").read()
                 for path in sorted(glob.glob(os.path.join(os.path.dirname(sklearn.__file__), "datasets", "descr",
                                                           "*.rst")))]
    documented = [value.__doc__ for module in (argparse, collections, email.message, json, pathlib, subprocess)
                  for _, value in sorted(vars(module).items()) if getattr(value, "__doc__", None)
                  and isinstance(value.__doc__, str) and len(value.__doc__) > 40]
    return described + documented
