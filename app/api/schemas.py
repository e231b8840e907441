"""Request/response models: they validate small JSON bodies and document the API.

Vector bodies are read raw (JSON or .npy) for speed; their models here document them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CreateMapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 0.05}}]})

    method: str = Field(description="rff, nrff, gcws, srf, random_maclaurin, tensorsketch, ssf (see GET /docs)")
    input_dim: int
    n_components: int = Field(description="output dimension (dense maps) or number of samples k (GCWS)")
    seed: int | None = None
    params: dict[str, Any] | None = None
    # A resolved spec may be posted back as it was returned; these are derived and checked.
    id: str | None = None
    output_dim: int | None = None
    format_version: int | None = None
    features: str | None = None
    has_hash: bool | None = None


class MapSpecResponse(BaseModel):
    id: str
    method: str
    input_dim: int
    n_components: int
    output_dim: int
    seed: int
    params: dict[str, Any]
    format_version: int
    features: str = Field(description="'dense' or 'one_hot'")
    has_hash: bool


class MapListResponse(BaseModel):
    maps: list[MapSpecResponse]
    next: str | None = Field(description="cursor for the next page (pass as ?after=), null at the end")


class SparseVector(BaseModel):
    indices: list[int]
    values: list[float]


class VectorsRequest(BaseModel):
    vectors: list[list[float]] | None = None
    sparse_vectors: list[SparseVector] | None = None


class HashRequest(VectorsRequest):
    bands: int | None = Field(default=None, description="LSH bands: k must be a multiple of it")


class KernelRequest(BaseModel):
    x: list[list[float]] | None = None
    sparse_x: list[SparseVector] | None = None
    y: list[list[float]] | None = Field(default=None, description="defaults to x")
    sparse_y: list[SparseVector] | None = None


class DenseFeatures(BaseModel):
    features: list[list[float]]


class OneHotFeaturesResponse(BaseModel):
    dim: int
    scale: float
    indices: list[list[int]]


class HashResponse(BaseModel):
    codes: list[list[int]]
    band_keys: list[list[str]] | None = None


class KernelResponse(BaseModel):
    estimate: list[list[float]]
    exact: list[list[float]]


def body_doc(model: type[BaseModel], npy: bool = True) -> dict[str, Any]:
    """openapi_extra documenting a raw-read body as JSON (and .npy where accepted)."""
    content: dict[str, Any] = {"application/json": {"schema": model.model_json_schema()}}
    if npy:
        content["application/x-npy"] = {"schema": {"type": "string", "format": "binary"}}
    return {"requestBody": {"required": True, "content": content}}
