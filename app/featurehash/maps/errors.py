"""Errors raised by the numerics, each naming the request field it concerns.

The service maps every one of them to a 4xx response; they subclass ValueError so
library users can catch them the usual way.
"""


class FeatureHashError(ValueError):
    """Base class: `field` names the offending input (e.g. "params.gamma", "vectors")."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class SpecError(FeatureHashError):
    """A map spec is invalid: unknown method, bad parameter, inconsistent sizes."""


class InputError(FeatureHashError):
    """Vectors handed to a map are unusable: wrong shape, NaN/inf, empty, all-zero."""


class UnsupportedOperation(FeatureHashError):
    """The map does not offer this operation (e.g. `hash` on a dense Fourier map)."""
