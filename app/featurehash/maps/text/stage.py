"""A text front stage for any map: `spec.input = {"hashing": {...}}` hashes documents, token lists or weighted
tokens into the map's `input_dim` columns (the hashing trick, featurehash.maps.text.hashing, with the same
params), so that one spec and one id cover text -> vectors -> features or codes.

Defaults follow the map: for maps with discrete codes (gcws, minhash, binning) the weights must stay nonnegative and
their scale is the kernel's business (GMM is a ratio of sums of minima and maxima of the weights), so the stage
defaults to unsigned columns and no norm, and `input_dim` to 2^30 columns (no dimension to choose: GCWS and
binning cost O(nnz) per row whatever input_dim is, and two of a document's ~10^3-10^4 distinct tokens share a
column with probability ~ 10^6..10^8 / 2^31); for dense maps (rff, nystroem, ...) the stage keeps the hashing
map's defaults (signed, l2 norm) and `input_dim` must be given, since their parameters grow with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import SpecError
from ..spec import MAX_INPUT_DIM, MapSpec
from .hashing import HashingMap, HashingParams

STAGES = ("hashing",)
EMPTY_CHOICES = ("error", "code")
CODE_MAP_DEFAULTS = {"alternate_sign": False, "norm": "none"}


def resolve_input(document: dict[str, Any], cls) -> dict[str, Any]:
    """The spec's `input` with every default filled in (and `input_dim` set where it has a default), or
    SpecError naming the field."""
    stage = document["input"]
    if getattr(cls, "text_input", False):
        raise SpecError("input", f"a '{cls.method}' map takes text itself; it has no front stage")
    if not isinstance(stage, dict) or "hashing" not in stage or set(stage) - {"hashing", "empty"}:
        raise SpecError("input", f"expected {{\"hashing\": {{...}}, \"empty\"?: ...}} (front stages: "
                                 f"{', '.join(STAGES)})")
    empty = stage.get("empty", "error")
    if empty not in EMPTY_CHOICES:
        raise SpecError("input.empty", f"one of {', '.join(EMPTY_CHOICES)}")
    if empty == "code" and cls.method not in ("gcws", "minhash"):
        raise SpecError("input.empty", "'code' is for gcws and minhash, whose codes need a nonempty row; other "
                                       "maps take an "
                                       "empty document as the zero vector (which nrff and srf refuse unless "
                                       "params.empty_rows is 'zero')")
    params = stage["hashing"] if stage["hashing"] is not None else {}
    if not isinstance(params, dict):
        raise SpecError("input.hashing", "expected an object")
    codes = getattr(cls, "has_hash", False)
    try:
        resolved = HashingParams(**{**(CODE_MAP_DEFAULTS if codes else {}), **params})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(".".join(["input", "hashing", *map(str, first.get("loc", ()))]), first["msg"]) from None
    if codes and resolved.alternate_sign:
        raise SpecError("input.hashing.alternate_sign", f"'{cls.method}' needs nonnegative weights: "
                                                        "alternate_sign must be false")
    if "input_dim" not in document:
        if not codes:
            raise SpecError("input_dim", "give the number of columns the text is hashed into (e.g. 262144): "
                                         f"a '{cls.method}' map's parameters grow with it")
        document["input_dim"] = MAX_INPUT_DIM
    resolved_stage = {"hashing": resolved.model_dump(mode="json")}
    if empty != "error":   # written only when chosen: the default adds nothing to the id
        resolved_stage["empty"] = empty
    return resolved_stage


def build(spec: MapSpec) -> HashingMap:
    """The front stage of a resolved spec: a hashing map into spec.input_dim columns, keyed by the spec's seed."""
    # Constructed, not validated: the params were resolved with the spec, and the stage's width (up to
    # 2^30 columns) is past what a stand-alone hashing map's n_components allows (a CSR of 2^30 columns is
    # fine as a map's input; as returned features it would be hard for most consumers).
    stage = MapSpec.model_construct(method="hashing", input_dim=1, n_components=spec.input_dim, seed=spec.seed,
                                    params=spec.input["hashing"], input=None)
    front = HashingMap(stage)
    front.empty_code = spec.input.get("empty", "error") == "code"
    return front
