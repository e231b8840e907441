"""Request/response models: they validate small JSON bodies and document the API.

Vector bodies are read raw (JSON or .npy) for speed; their models here document them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from ..maps import METHODS
from ..maps.spec import MAX_COMPONENTS, MAX_INPUT_DIM, MAX_SEED
from ..store.lsh_indexes import DEFAULT_RECALL_AT_THRESHOLD, DEFAULT_THRESHOLD, MAX_FOREST_LEVELS
from ..store.lsh_layout import MAX_BANDS, MAX_ITEM_ID_BYTES, MAX_SHARDS, NAME_PATTERN
# The documented examples (featurehash.protocol.examples) work in order against a fresh service.
from .examples import (EXAMPLE_DOCUMENTS, EXAMPLE_GCWS, EXAMPLE_GCWS_ID, EXAMPLE_HASHING,  # noqa: F401
                       EXAMPLE_RFF, EXAMPLE_ROWS, EXAMPLE_TEXT_GCWS, EXAMPLE_TEXT_GCWS_ID)

MAX_TOP_K = 1000
# Item ids as check_item_ids takes them (their UTF-8 length, at most MAX_ITEM_ID_BYTES, is not a JSON
# Schema keyword): no '/', '\\', control characters, line separators; not '.' or '..'.
ITEM_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_ITEM_ID_BYTES,
                  "pattern": "^[^/\\\\\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]+$",
                  "not": {"enum": [".", ".."]}}

def _omit_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def optional(annotation, description: str | None = None) -> Any:
    """A field that may be left out but is never null: the server refuses null where it reads the field,
    so the schema offers none (SkipJsonSchema) and shows no `default: null`."""
    return Annotated[annotation | SkipJsonSchema[None], Field(default=None, description=description,
                                                              json_schema_extra=_omit_default)]


class CreateMapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        EXAMPLE_RFF, EXAMPLE_GCWS, EXAMPLE_HASHING, EXAMPLE_TEXT_GCWS]})

    method: str = Field(description=f"one of: {', '.join(sorted(METHODS))}")
    input_dim: int | None = Field(default=None, strict=True, ge=1, le=MAX_INPUT_DIM, json_schema_extra=_omit_default,
                                  description="columns of the input vectors; 1 for 'hashing' (a row is a document); "
                                  "with a text `input` stage, the columns text is hashed into (default 2^30 for "
                                  "gcws, minhash and binning)")
    n_components: int | None = Field(default=None, strict=True, ge=1, le=MAX_COMPONENTS, json_schema_extra=_omit_default,
                                     description="output dimension (dense maps) or number of samples k (GCWS); "
                                     "required, except for 'additive_chi2', whose width input_dim * "
                                     "(2 sample_steps - 1) is its default")
    seed: int | None = Field(default=None, strict=True, ge=0, le=MAX_SEED)
    params: dict[str, Any] | None = None
    # A resolved spec may be posted back as it was returned; these are derived and checked.
    id: str | None = None
    output_dim: int | None = None
    format_version: int | None = None
    features: str | None = None
    has_hash: bool | None = None
    input: optional(dict[str, Any], "a text front stage, {\"hashing\": {...}} (the hashing map's params): the "
                    "map then also takes documents, tokens and weighted_tokens")


class MapSpecResponse(BaseModel):
    id: str
    method: str
    input_dim: int
    n_components: int
    output_dim: int
    seed: int
    params: dict[str, Any]
    format_version: int
    features: str = Field(description="'dense', 'one_hot' or 'sparse' (hashing)")
    has_hash: bool
    input: dict[str, Any] | None = Field(default=None, description="the text front stage, when the map has one")


class MapListResponse(BaseModel):
    maps: list[MapSpecResponse]
    next: str | None = Field(description="cursor for the next page (pass as ?after=), null at the end")


class SparseVector(BaseModel):
    indices: list[int]
    values: list[float]


DOCUMENTS = "documents (strings), for a hashing map or a map with a text `input` stage"
TOKENS = "token lists (lists of strings), for a map that takes text"
WEIGHTED_TOKENS = "weighted tokens ({token: weight}, weights finite and >= 0), for a map that takes text"


class VectorsRequest(BaseModel):
    """Exactly one of `vectors` (dense rows), `sparse_vectors`, `documents`, `tokens` or `weighted_tokens`."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"vectors": EXAMPLE_ROWS},
                                                               {"documents": EXAMPLE_DOCUMENTS}]})

    vectors: optional(list[list[float]])
    sparse_vectors: optional(list[SparseVector])
    documents: optional(list[str], DOCUMENTS)
    tokens: optional(list[list[str]], TOKENS)
    weighted_tokens: optional(list[dict[str, float]], WEIGHTED_TOKENS)


class HashRequest(VectorsRequest):
    model_config = ConfigDict(json_schema_extra={"examples": [{"vectors": EXAMPLE_ROWS},
                                                               {"documents": EXAMPLE_DOCUMENTS}]})

    bands: int | None = Field(default=None, ge=1, le=MAX_COMPONENTS,
                              description="LSH bands: k must be a multiple of it")


class KernelRequest(BaseModel):
    """One of `x`, `sparse_x`, `x_documents`, `x_tokens`, `x_weighted_tokens`; one of the same for y (or none:
    y = x)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"x": EXAMPLE_ROWS},
                                                               {"x_documents": EXAMPLE_DOCUMENTS}]})

    x: optional(list[list[float]])
    sparse_x: optional(list[SparseVector])
    x_documents: optional(list[str], DOCUMENTS)
    x_tokens: optional(list[list[str]], TOKENS)
    x_weighted_tokens: optional(list[dict[str, float]], WEIGHTED_TOKENS)
    y: optional(list[list[float]], "defaults to x")
    sparse_y: optional(list[SparseVector])
    y_documents: optional(list[str], DOCUMENTS)
    y_tokens: optional(list[list[str]], TOKENS)
    y_weighted_tokens: optional(list[dict[str, float]], WEIGHTED_TOKENS)


class DenseFeatures(BaseModel):
    features: list[list[float]]


class OneHotFeaturesResponse(BaseModel):
    dim: int
    scale: float
    indices: list[list[int]]


class SparseFeaturesResponse(BaseModel):
    dim: int = Field(description="columns of the features")
    indices: list[list[int]] = Field(description="per row, its nonzero columns (ascending)")
    values: list[list[float]] = Field(description="per row, the values at those columns")


class HashResponse(BaseModel):
    codes: list[list[int]]
    band_keys: list[list[str]] | None = None


class KernelResponse(BaseModel):
    estimate: list[list[float]]
    exact: list[list[float]]


# -- LSH indexes (/v1/indexes) ---------------------------------------------------------------

class CreateIndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"map_id": EXAMPLE_GCWS_ID, "name": "docs", "threshold": 0.7},
        {"map_id": EXAMPLE_TEXT_GCWS_ID, "name": "texts", "threshold": 0.5}]})

    map_id: str = Field(description="a map with discrete codes (has_hash: gcws, minhash, binning)")
    # null is accepted for these (as omitted), so the schema keeps it.
    name: str | None = Field(default=None, pattern=f"^{NAME_PATTERN.pattern}$",
                             description="the index id, 1-64 of A-Z a-z 0-9 _ . - (first not _ . -); its keys are "
                             "{key_prefix}index:{name}:*. Generated when omitted")
    bands: int | None = Field(default=None, ge=1, le=MAX_BANDS, strict=True,
                              description="L buckets per item; bands * rows <= the map's k codes")
    rows: int | None = Field(default=None, ge=1, le=MAX_COMPONENTS, strict=True,
                             description="r codes per band (at most the map's k codes)")
    threshold: float = Field(default=DEFAULT_THRESHOLD, gt=0, le=1, strict=True,
                             description="similarity to find; (bands, rows) are chosen for it when neither is given")
    recall_at_threshold: float = Field(default=DEFAULT_RECALL_AT_THRESHOLD, gt=0, lt=1, strict=True,
                                       description="probability that an item exactly at the threshold becomes a "
                                       "candidate; the choice minimises the false-positive area under that constraint")
    vectors: Literal["none", "sparse", "float32", "float16"] = Field(
        default="none", description="keep each item's vector to re-rank candidates by the exact kernel (GMM/pGMM for "
        "gcws, Jaccard of the supports for minhash, Laplacian for binning): 'sparse' (4 + 8 nnz bytes), 'float32' (4 d), 'float16' (2 d + 4); 'none' "
        "ranks by the match fraction of the k codes")
    forest_rows: list[Annotated[int, Field(ge=1, le=MAX_COMPONENTS - 1, strict=True)]] | None = Field(
        default=None, max_length=MAX_FOREST_LEVELS, description="shorter band prefixes (row counts below rows) also "
        "stored, each adding `bands` buckets per item: the levels a query with target_recall widens to")
    expected_items: int | None = Field(default=None, ge=1, le=2**32 - 1, strict=True, description="about how many "
                                       "items the index will hold (default 100000): sizes its partitioned hashes so "
                                       "that each item costs under ~1 KB up to ~1.5x that many; more still work, "
                                       "with more memory")
    shards: int | Literal["auto"] | None = Field(
        default=None, description="spread the index over this many shards (1-256), each under a Redis Cluster hash "
        "tag of its own, so that it uses every master of a cluster; 'auto': one per 8,000,000 expected_items (at "
        "least 2); omitted: one slot")

    @field_validator("shards")
    @classmethod
    def _shards_in_range(cls, value):
        if isinstance(value, int) and (isinstance(value, bool) or not 1 <= value <= MAX_SHARDS):
            raise ValueError(f"1 to {MAX_SHARDS}, or 'auto'")
        return value


class IndexResponse(BaseModel):
    id: str = Field(description="the index name: the `index_id` of its paths and error fields")
    name: str = Field(description="the same as `id`, kept for older clients: read `id`",
                      json_schema_extra={"deprecated": True})
    map_id: str
    method: str
    n_codes: int = Field(description="k codes per vector (all of them re-rank the candidates)")
    bands: int
    rows: int
    threshold: float
    recall_at_threshold: float
    bands_chosen_by: str = Field(description="'threshold' or 'request'")
    collision_probability_at_threshold: float = Field(description="1 - (1 - threshold^rows)^bands")
    half_point: float = Field(description="similarity with collision probability 1/2")
    items: int
    vectors: str = Field(default="none", description="how item vectors are kept ('none': codes only)")
    ranking: str = Field(default="codes", description="'exact' (the map's kernel on stored vectors) or 'codes'")
    forest_rows: list[int] = Field(default_factory=list, description="band prefix lengths a query can widen to")
    key_prefix: str = Field(description="every Redis key of the index starts with it (of a sharded index: its meta)")
    shards: int = Field(default=1, description="the shards it is spread over (each a hash tag of its own)")


class TenantListResponse(BaseModel):
    tenants: list[str] = Field(description="every tenant the keys name or that has created an index, sorted")


class IndexListResponse(BaseModel):
    indexes: list[IndexResponse]
    next: str | None = Field(description="cursor for the next page (pass as ?after=), null at the end")


class AddItemsRequest(VectorsRequest):
    model_config = ConfigDict(json_schema_extra={"examples": [{"ids": ["a", "b"], "vectors": EXAMPLE_ROWS},
                                                               {"ids": ["a", "b"], "documents": EXAMPLE_DOCUMENTS}]})

    ids: list[Annotated[str, Field(json_schema_extra=lambda schema: schema.update(ITEM_ID_SCHEMA))]] = Field(
        description="one id per vector, distinct, 1 to 512 bytes of UTF-8 (no '/', '\\', control characters "
        "U+0000-U+001F and U+007F-U+009F, U+2028, U+2029; not '.' or '..'); an existing id is replaced. With "
        "an .npy body send them in the X-Item-Ids header (a JSON array, UTF-8) or as repeated ?ids= parameters")


class AddItemsResponse(BaseModel):
    added: int
    replaced: int
    items: int = Field(description="items in the index afterwards")


class DeleteItemsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"ids": ["b"]}]})

    ids: list[Annotated[str, Field(min_length=1, max_length=MAX_ITEM_ID_BYTES)]] = Field(
        min_length=1, description="ids to remove; unknown ones are reported, not an error")


class DeleteItemsResponse(BaseModel):
    removed: int
    missing: list[str] = Field(description="the ids that were not in the index")


class IndexQueryRequest(VectorsRequest):
    """Exactly one of `vectors`, `sparse_vectors`, `documents`, `tokens`, `weighted_tokens` (for a map with a text
    stage) or `ids` (stored items, each left out of its own results)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"vectors": EXAMPLE_ROWS[:1], "top_k": 2},
                                                              {"ids": ["a"], "top_k": 2},
                                                              {"documents": EXAMPLE_DOCUMENTS[1:], "top_k": 2}]})

    ids: optional(list[Annotated[str, Field(min_length=1, max_length=MAX_ITEM_ID_BYTES)]],
                  "stored item ids to find the neighbours of (instead of vectors); an unknown id is a 404 naming it")

    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K,
                       description="neighbours per query vector (query parameter with .npy)")
    min_similarity: float = Field(default=0.0, ge=0, le=1, description="drop estimates below it")
    target_recall: float | None = Field(default=None, ge=0, le=1, description="widen the search over the forest "
                                        "levels until the S-curve gives this recall at the k-th result's similarity")


MAX_CLUSTER_SIZE = 2**31 - 1


class DuplicatesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"threshold": 0.8, "mode": "components", "min_cluster_size": 2}]})

    threshold: float | None = Field(default=None, gt=0, le=1, strict=True, description="pairs at least this "
                                    "similar are duplicates (default: the index's threshold); below the index's "
                                    "own, fewer of them become candidates (see recall_at_threshold)")
    mode: Literal["components", "representatives"] = Field(
        default="components", description="'components': connected components of the similar pairs (transitive); "
        "'representatives': no chaining, in id order an item joins the first earlier representative it is similar "
        "to. The representative is the smallest id of a cluster")
    min_cluster_size: int = Field(default=2, ge=2, le=MAX_CLUSTER_SIZE, strict=True,
                                  description="smaller clusters are left out")


class DuplicateCluster(BaseModel):
    representative: str = Field(description="the smallest id of the cluster (string order)")
    members: list[str] = Field(description="the cluster's ids in string order, the representative first")


class DuplicatesResponse(BaseModel):
    """Streamed: the fields, then the clusters as they are encoded. With Accept: application/x-ndjson, the
    same as lines: the fields without "clusters" first, then one cluster a line."""

    threshold: float
    mode: str
    verify: str = Field(description="'exact' (the map's kernel on the stored vectors) or 'codes' (the match "
                        "fraction of the k codes, for an index without vectors)")
    bands: int
    rows: int
    recall_at_threshold: float = Field(description="1 - (1 - threshold^rows)^bands: the probability that a pair "
                                       "exactly at the threshold shared a bucket (became a candidate)")
    candidates: int = Field(description="distinct pairs of items sharing a bucket, verified")
    pairs: int = Field(description="verified pairs at least as similar as the threshold")
    clusters: list[DuplicateCluster] = Field(description="in their representatives' order")


class Neighbour(BaseModel):
    id: str
    similarity: float = Field(description="match fraction of the k codes: the estimate of the map's similarity")


class IndexQueryResponse(BaseModel):
    results: list[list[Neighbour]] = Field(description="per query vector, best first")
    candidates: list[int] = Field(description="per query vector, the distinct items re-ranked")
    estimated_recall: list[float] = Field(description="per query vector, the S-curve's probability that an item as "
                                          "similar as the k-th result (the last one when fewer than top_k were "
                                          "found; min_similarity when none was) became a candidate, at the level "
                                          "probed")
    rows_probed: list[int] = Field(description="per query vector, the band prefix length of the level probed last")


class ErrorResponse(BaseModel):
    """The body of every 4xx and 5xx answer."""

    detail: str = Field(description="'<field>: <what is wrong>'")
    field: str = Field(description="the request field at fault (e.g. 'vectors', 'params.gamma', 'body', 'store')")


class HealthResponse(BaseModel):
    status: Literal["ok"]


class ReadyResponse(BaseModel):
    status: Literal["ready"]
    maps_cached: int = Field(description="maps held built in this worker's cache")
    cache_bytes: int = Field(description="bytes those maps hold")


ERROR_DESCRIPTIONS: dict[int, str] = {
    401: "API key missing or wrong (when the service has one)",
    403: "the key lacks the scope the operation requires (named in the answer, field 'scope')",
    404: "no such map, index or item (another tenant's index is not found either)",
    406: "Accept: application/x-npy for sparse features (a hashing map's): they are answered as JSON",
    409: "conflicting index configuration, a concurrent write (retry after Retry-After), or a map that "
         "indexes use (see DELETE /v1/maps/{map_id})",
    413: "body over the size limit, or (POST /v1/maps) a stored spec over the size limit of one map, naming its "
         "largest field",
    415: "content type not accepted, or a Content-Encoding (bodies are sent uncompressed)",
    422: "invalid input, naming the field; also an operation the map does not offer (hash on a dense map)",
    429: "the key is over its requests_per_second or concurrent_requests limit (named in 'field'); retry after "
         "Retry-After seconds",
    503: "Redis unreachable, or refusing writes (a read-only replica, no append-only file); retry after "
         "Retry-After seconds",
    507: "Redis out of memory or disk: the write was refused or not persisted (not acknowledged); retry after "
         "Retry-After seconds. Or (field 'stored_bytes', no Retry-After) the write (items, or a new map) would take "
         "the tenant past its stored-bytes limit: nothing of it was written"}
BINARY = {"schema": {"type": "string", "format": "binary"}}
NPY_CONTENT = {"application/x-npy": BINARY}
LOCATION = {"Location": {"description": "the URL of the created resource", "schema": {"type": "string"}}}
# Added by the service's middleware (service/first_calls.py) to any answer whose request compiled a kernel or
# waited for numba's compile lock; declared on the routes that compute with a map, the only ones that can.
COMPILED = {"X-Featurehash-Compiled": {
    "description": "present only when this request compiled kernels itself (none compiled yet for its map, "
                   "input form or dtype): `waited=W compiled=C`, seconds waiting for numba's compile lock and "
                   "compiling", "schema": {"type": "string", "pattern": r"^waited=\d+\.\d{3} compiled=\d+\.\d{3}$"}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route gives, each with the one error body."""
    return {status: {"model": ErrorResponse, "description": ERROR_DESCRIPTIONS[status]} for status in statuses}


# The raw-read bodies' models: added under components by featurehash.service.api.openapi.
BODY_MODELS: dict[str, type[BaseModel]] = {}


INPUT_KINDS = ("documents", "x_documents", "tokens", "weighted_tokens", "vectors", "sparse_vectors", "x", "ids")


def _example_name(example: dict[str, Any], number: int) -> str:
    if "method" in example:
        return example["method"] + (" over text" if "input" in example else "")
    if "map_id" in example:
        return f"index '{example['name']}'"
    if "mode" in example:
        return example["mode"]
    return next((key for key in INPUT_KINDS if key in example), f"example {number}")


def _example(example: dict[str, Any], text_with: dict[str, str] | None) -> dict[str, Any]:
    """A named example; a text body's says which path parameters it goes with (a map or index that reads text)."""
    if text_with is None or not any(key.endswith(("documents", "tokens")) for key in example):
        return {"value": example}
    where = ", ".join(f"{name} = {value}" for name, value in text_with.items())
    return {"value": example, "description": f"text: send it with {where} (a map that reads text)",
            "x-parameters": text_with}


def body_doc(model: type[BaseModel], npy: bool = True, query: tuple[dict[str, Any], ...] = (),
             text_with: dict[str, str] | None = None) -> dict[str, Any]:
    """openapi_extra documenting a raw-read body as JSON (and .npy where accepted) by reference to its
    model's schema, and the query parameters the route reads itself."""
    BODY_MODELS[model.__name__] = model
    content: dict[str, Any] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}
    examples = (model.model_config.get("json_schema_extra") or {}).get("examples")
    if examples:  # what /docs fills "Try it out" with (a menu when there are several)
        content["application/json"]["examples"] = {
            _example_name(example, number): _example(example, text_with)
            for number, example in enumerate(examples, start=1)}
    if npy:
        content.update(NPY_CONTENT)
    extra: dict[str, Any] = {"requestBody": {"required": True, "content": content}}
    if query:
        extra["parameters"] = [{"in": "query", "required": False, **parameter} for parameter in query]
    return extra


# Plain routes (featurehash.service.api.deps.checked_state) document what FastAPI would have from their signature.
BEARER_SECURITY = [{"HTTPBearer": []}]


def plain_route_doc(model: type[BaseModel], path: tuple[dict[str, Any], ...],
                    query: tuple[dict[str, Any], ...] = (), text_with: dict[str, str] | None = None) -> dict[str, Any]:
    """body_doc for a route that reads its path and query parameters and the API key itself."""
    extra = body_doc(model, query=query, text_with=text_with)
    extra["parameters"] = [{"in": "path", "required": True, **parameter} for parameter in path] \
        + extra.get("parameters", [])
    extra["security"] = BEARER_SECURITY
    return extra


def operation_id(route) -> str:
    """operationId = the route function's name (create_map, transform, ...): what generated clients call."""
    return route.name
