"""The map spec: everything a replica needs to rebuild a feature map bit for bit.

A spec is `{method, input_dim, n_components, seed, params}` with every default
resolved (see `featurehash.maps.registry.resolve_spec`), and optionally `input`, a front stage that turns
text into the map's input vectors (`{"hashing": {...}}`: documents, token lists or weighted tokens hashed
into `input_dim` columns by featurehash.maps.text.hashing). A spec without `input` has the id it always had:
the key is left out of the canonical JSON when it is absent. Its id hashes the canonical JSON of
the spec together with FORMAT_VERSION, so the same spec always gets the same id and
a change of the numeric format can never silently reuse an old id.
A requested spec's params may hold a numpy array (a `fit_sample` given as one, `inputs.SampleRows`): it is
written into the canonical JSON as the list of its float64 numbers would be (orjson's numpy
serialisation writes the same text), so the id does not depend on the form the rows came in.
"""

from __future__ import annotations

import hashlib
import sys
from functools import cached_property
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, computed_field

# Bump when the meaning of a stored spec changes (randomness derivation, feature layout).
FORMAT_VERSION = 1

MAX_INPUT_DIM = 2**30
MAX_COMPONENTS = 2**22
MAX_SEED = 2**63 - 1

# Keys a client may echo back from a resolved spec; they are derived, never chosen.
DERIVED_KEYS = ("id", "output_dim", "format_version", "features", "has_hash")


class MapSpec(BaseModel):
    """A resolved spec. Build it with `resolve_spec`, which also validates `params`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    input_dim: int = Field(ge=1, le=MAX_INPUT_DIM, strict=True)
    n_components: int = Field(ge=1, le=MAX_COMPONENTS, strict=True)
    seed: int = Field(default=0, ge=0, le=MAX_SEED, strict=True)
    params: dict[str, Any] = Field(default_factory=dict)
    input: dict[str, Any] | None = None

    def canonical_json(self) -> bytes:
        """Sorted-key JSON of the spec and the format version: the input of the id."""
        document = {
            "format_version": FORMAT_VERSION,
            "method": self.method,
            "input_dim": self.input_dim,
            "n_components": self.n_components,
            "seed": self.seed,
            "params": self.params,
        }
        if self.input is not None:
            document["input"] = self.input
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def id(self) -> str:
        digest = hashlib.sha256(self.canonical_json()).hexdigest()[:24]
        return f"{self.method}-v{FORMAT_VERSION}-{digest}"

    def to_dict(self) -> dict[str, Any]:
        """The spec as stored and returned: the resolved fields plus id and format version."""
        document = self.model_dump()
        if document["input"] is None:
            del document["input"]
        return {**document, "format_version": FORMAT_VERSION}


def params_document(params: BaseModel) -> dict[str, Any]:
    """A params model as a spec's params: its JSON-mode dump, with numpy arrays (a fit_sample given as one)
    kept as they are, in field order (pydantic's list serializer does not take arrays, and a list of
    thousands of rows is what the array spares)."""
    numpy = sys.modules.get("numpy")   # not imported here: `import featurehash` stays free of numpy
    arrays = {} if numpy is None else {name: value for name, value in params if isinstance(value, numpy.ndarray)}
    if not arrays:
        return params.model_dump(mode="json")
    dumped = params.model_dump(mode="json", exclude=set(arrays))
    fields = type(params).model_fields
    document = {name: arrays.get(name, dumped.get(name)) for name in fields if name in arrays or name in dumped}
    return {**document, **{name: value for name, value in dumped.items() if name not in fields}}
