"""Service settings, all from the environment (prefix FEATUREHASH_, plus REDIS_URL)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 2**20


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FEATUREHASH_", extra="ignore")

    # Unset: `featurehash serve` starts an embedded Redis persisting under data_dir.
    redis_url: str | None = Field(default=None, validation_alias=AliasChoices("REDIS_URL", "FEATUREHASH_REDIS_URL"))
    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    # One admin key of tenant "default" (alone, or beside the keys file's keys).
    api_key: SecretStr | None = None
    # The keys file (JSON: keys with tenants, scopes and limits; featurehash.service.auth.keys), re-read when it
    # changes and on SIGHUP. Neither set: the service is open, every caller the admin of tenant "default".
    keys_file: Path | None = None
    # Set by `featurehash serve` for its web tier, not by hand: its copy of the last keys file it validated, which
    # a worker starting while keys_file does not validate serves instead (featurehash.service.auth.last_good).
    keys_last_good_file: Path | None = None
    key_prefix: str = "featurehash:"
    # Per-key limits (service/api/quotas.py; counted in Redis, so they hold across workers and replicas): defaults
    # for keys of the keys file that set none (FEATUREHASH_API_KEY's key and an open service have none). Unset:
    # unlimited. A rate admits bursts of rate x rate_burst_seconds requests (at least 1); a concurrency lease a
    # crashed worker held lapses after lease_seconds (running requests renew theirs every lease_seconds / 3).
    default_requests_per_second: float | None = Field(default=None, gt=0)
    default_concurrent_requests: int | None = Field(default=None, ge=1)
    rate_burst_seconds: float = Field(default=1.0, gt=0)
    lease_seconds: float = Field(default=60.0, ge=1)
    # A worker may take up to rate x this many seconds of a key's rate at once and admit them without Redis for as
    # long (a rate-only key whose traffic brings a worker >= 2 requests in that time); 0: one round trip a request.
    rate_reservation_seconds: float = Field(default=0.1, ge=0)

    max_body_bytes: int = Field(default=64 * MIB, ge=1)
    max_batch_rows: int = Field(default=100_000, ge=1)
    map_cache_bytes: int = Field(default=512 * MIB, ge=0)
    max_map_bytes: int = Field(default=1024 * MIB, ge=1)
    # A new map whose stored spec (its JSON in Redis) is longer is refused (413 naming its largest field); maps
    # stored before are kept. 16 MiB: a nystroem map fitted to 1000 rows of 64 columns with 1000 components stores
    # 12.3 MB (its L^-1 rows); the largest the maps allow (nystroem's 2^20 stored numbers) ~20 MB. A map's bytes
    # also count in its tenant's stored_bytes (featurehash.store.map_accounting).
    max_spec_bytes: int = Field(default=16 * MIB, ge=1024)
    # GCWS and binning: per-map table of random constants; past it they are made on demand.
    table_budget_bytes: int = Field(default=256 * MIB, ge=0)

    # What one request may hold besides its body: streamed responses are computed and encoded this many
    # array bytes at a time by a worker's `stream_threads` stream threads, shared by its streams (so a
    # streamed answer holds at most stream_threads + 3 chunks: those queued ahead or made, the one sent
    # and the transport's copy of its unsent part); /kernel's feature and input matrices must fit the
    # work budget.
    # 4 MiB: each chunk's product packs W once, and 256-row chunks of rff D = 4096 cost the server 7% less
    # CPU than 128-row ones (a batch of 4096 rows over npy: 84-94 ms against 90-97, five A/B runs).
    stream_chunk_bytes: int = Field(default=4 * MIB, ge=4096)
    stream_threads: int = Field(default=2, ge=1)
    request_work_bytes: int = Field(default=256 * MIB, ge=MIB)
    # CPU seconds of one core one request may cost, as the cost model (featurehash.maps.cost) estimates it before
    # any work: a spec whose creation or single row exceeds it is refused (naming the field that drives it), and
    # so is a batch over it (naming vectors, with the most rows that fit). The model over-estimates 1.2-13x.
    # 30: a single row of tensorsketch degree 64 at 2^22 components (~12 s predicted) passes, 4 do not.
    request_work_seconds: float = Field(default=30.0, gt=0)
    max_kernel_entries: int = Field(default=2**21, ge=1)
    # POST /v1/indexes/{index_id}/duplicates answers synchronously: an index with more items is refused (422 naming
    # index_id, pointing to LSHIndex.duplicates in the library and to `featurehash dedup`), and so is one whose bucket
    # scan or candidate pairs the cost model (featurehash.store.index.duplicates) puts over request_work_seconds.
    max_duplicates_items: int = Field(default=200_000, ge=1)
    # A query row takes its band buckets in order until they held this many members (the rest of a bucket that
    # passes it is left); a query whose rows find more candidates in all than the cost model
    # (featurehash.store.index.queries.candidates_within) fits in request_work_seconds is refused (422 naming the
    # rows' field). Every Redis call of a query does bounded work either way (compact.scripts.PROBE_FETCH).
    max_query_candidates: int = Field(default=10_000, ge=1)

    # Text bodies (documents, tokens, weighted_tokens; featurehash.protocol.text_inputs), counted in characters (a
    # JSON body's bytes do not bound them: escapes) before any analysis; the cost model prices the characters too.
    max_document_chars: int = Field(default=1_000_000, ge=1)
    max_request_chars: int = Field(default=16_000_000, ge=1)
    max_request_tokens: int = Field(default=4_000_000, ge=1)
    # Admission control (service/api/admission.py): the request memory a worker may have in flight (bodies, JSON
    # decoding, streamed answers, /kernel work); past it a request gets a 503 with Retry-After at once.
    # Unset: 4 x max_body_bytes (256 MiB). Bodies up to admit_small_bytes are always admitted.
    inflight_bytes: int | None = Field(default=None, ge=MIB)
    admit_small_bytes: int = Field(default=64 * 1024, ge=0)
    # rows x output width of one transform or hash answer (bounds its time; 2^28 float32 = 1 GiB as npy).
    max_output_elements: int = Field(default=2**28, ge=1)

    # JSON lines on stderr (method, route template, status, duration, request id); 5xx at "warning".
    access_log_level: Literal["debug", "info", "warning", "off"] = "info"
    # FastAPI's own OpenTelemetry spans, metrics and logs (FastAPI >= 0.165 with opentelemetry-api). Off: the
    # service has its Prometheus metrics and access log, and the per-request check whether an OpenTelemetry
    # provider is configured cost ~8 us of a ~100 us single-vector request (measured).
    opentelemetry: bool = False

    # How long a map deleted on one replica may still serve on another (0: ask the store on every request).
    # Maps confirmed in the store are trusted while Redis's invalidation channel answered within it.
    map_staleness_seconds: float = Field(default=1.0, ge=0)

    # Threads each web worker's BLAS (OpenBLAS, MKL) may use; `featurehash serve` sets them before the web
    # tier starts. One: a streamed answer's next chunks are computed `stream_threads` at a time, one core
    # each, while the event loop sends the last, and N workers on N cores do not oversubscribe them (on a busy 2-core host two BLAS
    # threads made a 128-row chunk's product 10x slower than one).
    blas_threads: int = Field(default=1, ge=1)

    # Load every method's compiled kernels at startup, on a background thread, and answer /readyz with 503
    # until they are in: a new worker's first rff request otherwise took 127 ms instead of 0.7 (measured),
    # loading numba's cache. Off by default: with an empty cache (no `featurehash warm-cache`) this compiles
    # for ~40 s on 2 cores. The Docker image, built warm, turns it on.
    preload_kernels: bool = False
    # Compile a map's kernels on a background thread when this process builds it (creation, or the first
    # request for a stored map), so that its first transform does not (service/first_calls.py). Off only to
    # measure what it saves (bench/bench_first_calls.py) or to keep a worker's CPU for requests alone.
    warm_maps: bool = True

    # When a write is acknowledged (2xx). "aof": once Redis's append-only file has it (INFO persistence after its
    # reply: one more round trip per write); refused with 507/503 while the file cannot be written or
    # Redis keeps none. "reply": on Redis's reply, surviving a restart only as far as the server persists.
    durability: Literal["aof", "reply"] = "aof"
    # Sockets (featurehash.service.connection_guard): a connection that has not sent complete request headers this long
    # after being accepted (or after its next request's first byte) is closed; a request body with no new bytes
    # for body_timeout_seconds (while the server reads) gets a 408, and an answer the client takes no byte of for
    # as long is cut off. Each worker holds at most max_connections (lowered to fit its open-file limit); at the
    # cap the connection waiting longest for its headers is closed to admit a new one.
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    # 4096: past the cap an attacker's reconnects churn connections, and the full garbage collections that churn
    # brings stop the loop for a time that grows with the connections held (up to 0.3 s at 4096, 0.7 s at 10,000:
    # bench/bench_abuse.py, 20,000 half-open connections, a loaded 2-core host).
    max_connections: int = Field(default=4096, ge=1)

    redis_timeout_seconds: float = Field(default=2.0, gt=0)
    retry_after_seconds: int = Field(default=1, ge=1)

    @property
    def inflight_budget(self) -> int:
        return self.inflight_bytes if self.inflight_bytes is not None else 4 * self.max_body_bytes


@lru_cache
def get_settings() -> Settings:
    return Settings()
