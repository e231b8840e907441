"""Errors raised by the numerics, each naming the request field it concerns.

The service maps every one of them to a 4xx response; they subclass ValueError so
library users can catch them the usual way.
"""

import tokenize
import zipfile
import zlib

# What reading a malformed .npy or .npz file raises besides InputError and OSError: numpy parses a header's
# dict with Python's tokenizer and literal parser (a garbled one raises ValueError, SyntaxError,
# tokenize.TokenError or TypeError), a truncated file EOFError, and a damaged archive zipfile.BadZipFile,
# zlib.error or KeyError; scipy's load_npz NotImplementedError for a format it cannot read.
MALFORMED_FILE_ERRORS = (ValueError, TypeError, SyntaxError, tokenize.TokenError, EOFError, KeyError,
                         zipfile.BadZipFile, zlib.error, NotImplementedError, OverflowError, MemoryError)


class FeatureHashError(ValueError):
    """Base class: `field` names the offending input (e.g. "params.gamma", "vectors")."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self):
        # Pickled as its attributes (a Dask, loky or Spark worker's error reaches the caller whole); the
        # default would call __init__ with the one formatted string.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls, args, state):
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class SpecError(FeatureHashError):
    """A map spec is invalid: unknown method, bad parameter, inconsistent sizes."""


class InputError(FeatureHashError):
    """Vectors handed to a map are unusable: wrong shape, NaN/inf, empty, all-zero."""


class UnsupportedOperation(FeatureHashError):
    """The map does not offer this operation (e.g. `hash` on a dense Fourier map)."""
