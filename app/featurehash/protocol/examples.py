"""The OpenAPI document's examples: bodies, path and query parameters that work as they are.

Sent in this order to a fresh service ("Try it out" in /docs, tests/service/test_openapi_examples.py), each gets
a 2xx: the maps, then the indexes over the two GCWS maps ('docs' over vectors, 'texts' over documents), their
items, queries and duplicates, the reads, and the deletes last (items, indexes, maps). A path parameter's first
example is its default, what "Try it out" fills in; a body example that needs another one (text bodies need a
map that reads text) says so in its description and, for tests and tools, in its `x-parameters`.

Map ids are content-addressed, so the example specs' ids are fixed: they are written out here (computing them
at import would build the spec machinery for every import of the service) and a test checks them against the
library and the server.
"""

from __future__ import annotations

from typing import Any

EXAMPLE_RFF = {"method": "rff", "input_dim": 4, "n_components": 8, "seed": 1, "params": {"gamma": 0.5}}
EXAMPLE_GCWS = {"method": "gcws", "input_dim": 4, "n_components": 16, "seed": 1}
# Text (documents, tokens, weighted_tokens): the hashing trick as a map, and GCWS over word 3-shingles of text.
EXAMPLE_HASHING = {"method": "hashing", "n_components": 1024, "seed": 1}
EXAMPLE_TEXT_GCWS = {"method": "gcws", "n_components": 64, "seed": 1,
                     "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}}
EXAMPLE_SPECS = {"gcws": EXAMPLE_GCWS, "rff": EXAMPLE_RFF, "hashing": EXAMPLE_HASHING,
                 "gcws over text": EXAMPLE_TEXT_GCWS}
# featurehash.maps.registry.resolve_spec(spec).id of each (checked by tests/service/test_openapi_examples.py)
EXAMPLE_MAP_IDS = {"gcws": "gcws-v1-67eefb812edb7a5f4dee12a2", "rff": "rff-v1-ce6227a80a47f7b3ad692249",
                   "hashing": "hashing-v1-794dd735bf61d19127355206",
                   "gcws over text": "gcws-v1-3f766cc9c9aad901897cdf31"}
EXAMPLE_GCWS_ID = EXAMPLE_MAP_IDS["gcws"]
EXAMPLE_TEXT_GCWS_ID = EXAMPLE_MAP_IDS["gcws over text"]

EXAMPLE_ROWS = [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]
EXAMPLE_DOCUMENTS = ["the quick brown fox jumps over the lazy dog", "the quick brown fox jumped over a lazy dog"]
EXAMPLE_INDEXES = {"docs": EXAMPLE_GCWS_ID, "texts": EXAMPLE_TEXT_GCWS_ID}

# What a text body example is sent with (map_id on /v1/maps/{map_id}/..., index_id on /v1/indexes/{index_id}/...).
TEXT_MAP = {"map_id": EXAMPLE_TEXT_GCWS_ID}
TEXT_INDEX = {"index_id": "texts"}


def _named(values: dict[str, Any], summary: str) -> dict[str, dict[str, Any]]:
    return {name: {"summary": summary.format(name=name), "value": value} for name, value in values.items()}


# OpenAPI `examples` of the path parameters, the first the default.
MAP_ID_EXAMPLES = _named(EXAMPLE_MAP_IDS, "the id of the example '{name}' map (POST /v1/maps)")
INDEX_ID_EXAMPLES = _named({name: name for name in EXAMPLE_INDEXES}, "the example index '{name}' (POST /v1/indexes)")
ITEM_ID_EXAMPLES = {"a": {"summary": "an item the example bodies add", "value": "a"}}

# Query parameters: values that work with the example bodies (a JSON body's own field wins over the same
# option in the query, except bands, which the hash example bodies leave to the query for that reason).
def query_examples(value: Any, summary: str) -> dict[str, dict[str, Any]]:
    return {"example": {"summary": summary, "value": value}}
