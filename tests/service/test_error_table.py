"""The error table (service/api/errors.py ERROR_ANSWERS): every row is installed, and every exception it names
is answered with its status and the one JSON error body naming a field, with Retry-After exactly where the row
says. In process, no Redis. The bytes of each answer are pinned by the HTTP tests (test_service_errors.py,
test_service_redis_trouble.py, test_service_durability.py, test_quotas.py, test_tenants.py, ...)."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from prometheus_client import REGISTRY
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from redis.exceptions import BusyLoadingError, ConnectionError as RedisConnectionError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from featurehash.maps import FeatureHashError, InputError
from featurehash.protocol.codecs import UnsupportedMediaType
from featurehash.service.api.admission import Refused
from featurehash.service.api.errors import (ERROR_ANSWERS, BodyTooLarge, Forbidden, MapInUse, MapNotFound,
                                            NotAcceptable, Unauthorized, install_error_handlers)
from featurehash.service.api.quotas import TooManyRequests
from featurehash.service.auth import Principal, Scope
from featurehash.store.durability import WriteRefused
from featurehash.store.lsh_accounting import StoredBytesExceeded
from featurehash.store.index.handles import IndexConflict, IndexNotFound, ItemNotFound
from featurehash.store.map_accounting import MapBytesExceeded, SpecTooLarge
from featurehash.store.redis_steps import TransactionConflict

RETRY_AFTER = 7
READER = Principal(tenant="team-a", key_id="reader", scopes=frozenset({Scope.READ}))

# Exception type -> (an instance, the status it is answered with, its Retry-After or None). Each row of the
# table needs one: a new row without a sample fails test_every_row_has_a_sample.
SAMPLES: dict[type, list[tuple[BaseException, int, str | None]]] = {
    FeatureHashError: [(InputError("vectors", "not finite"), 422, None)],
    RequestValidationError: [(RequestValidationError([{"type": "missing", "loc": ("body", "spec", 0),
                                                       "msg": "Field required"}]), 422, None),
                             (RequestValidationError([{"type": "json_invalid", "loc": ("body", 1), "msg": "x"}]),
                              422, None)],
    MapNotFound: [(MapNotFound("m1"), 404, None)],
    MapInUse: [(MapInUse("m1", ["a", "b"]), 409, None), (MapInUse("m1", [], other_tenants=2), 409, None)],
    IndexNotFound: [(IndexNotFound("idx"), 404, None)],
    ItemNotFound: [(ItemNotFound("item"), 404, None)],
    IndexConflict: [(IndexConflict("bands", "the index has 4"), 409, None)],
    TransactionConflict: [(TransactionConflict("the keys kept changing"), 409, str(RETRY_AFTER))],
    Unauthorized: [(Unauthorized(), 401, None)],
    Forbidden: [(Forbidden(Scope.WRITE, READER), 403, None)],
    TooManyRequests: [(TooManyRequests(READER, "requests_per_second", 2.5, 3), 429, "3")],
    StoredBytesExceeded: [(StoredBytesExceeded(100, 90, 20, stored=5), 507, None)],
    MapBytesExceeded: [(MapBytesExceeded(100, 100, None), 507, None)],
    SpecTooLarge: [(SpecTooLarge("params.sample", 5000, 4096), 413, None)],
    BodyTooLarge: [(BodyTooLarge(1024), 413, None)],
    NotAcceptable: [(NotAcceptable("accept", "sparse features are JSON"), 406, None)],
    UnsupportedMediaType: [(UnsupportedMediaType("text/plain"), 415, None)],
    HTTPException: [(HTTPException(404), 404, None), (HTTPException(405), 405, None),
                    (HTTPException(400, "bad request"), 400, None)],
    Refused: [(Refused(503, "load", "over the in-flight budget", retry_after=2), 503, "2"),
              (Refused(413, "body", "too large"), 413, None)],
    ClientDisconnect: [(ClientDisconnect(), 408, None)],
    RedisConnectionError: [(RedisConnectionError("refused"), 503, str(RETRY_AFTER)),
                           (BusyLoadingError("LOADING"), 503, str(RETRY_AFTER))],
    RedisTimeoutError: [(RedisTimeoutError("timed out"), 503, str(RETRY_AFTER))],
    WriteRefused: [(WriteRefused("Redis is out of memory", insufficient_storage=True), 507, str(RETRY_AFTER)),
                   (WriteRefused("Redis is read-only"), 503, str(RETRY_AFTER))],
    ResponseError: [(ResponseError("OOM command not allowed when used memory > 'maxmemory'"), 507,
                     str(RETRY_AFTER)),
                    (ResponseError("BUSY Redis is busy running a script"), 503, str(RETRY_AFTER)),
                    (ResponseError("WRONGTYPE Operation against a key"), 500, None)],
}
CASES = [(kind, exc, status, retry) for kind, found in SAMPLES.items() for exc, status, retry in found]


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, RETRY_AFTER, 1.5)

    async def raise_case(request: Request, case: int):
        request.scope.setdefault("state", {})["principal"] = READER  # what the stored-bytes count reads
        raise CASES[case][1]

    app.add_api_route("/raise/{case}", raise_case, methods=["POST"], name="create_map")
    return app


async def _answers(app: FastAPI) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://app") as client:
        return [await client.post(f"/raise/{case}") for case in range(len(CASES))]


def test_every_row_has_a_sample():
    assert set(SAMPLES) == set(ERROR_ANSWERS)


def test_every_row_is_installed():
    app = _app()
    for exception in ERROR_ANSWERS:
        assert exception in app.exception_handlers, exception


@pytest.fixture(scope="module")
def answers() -> list[httpx.Response]:
    return asyncio.run(_answers(_app()))


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{kind.__name__}-{status}" for kind, _, status, _ in CASES])
def test_each_row_answers_a_json_error_naming_a_field(answers, case):
    kind, exc, status, retry_after = CASES[case]
    answer = answers[case]
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert set(body) == {"detail", "field"} and body["field"], body
    assert body["detail"].startswith(f"{body['field']}: ") and len(body["detail"]) > len(body["field"]) + 2, body
    assert answer.headers.get("retry-after") == retry_after
    if isinstance(exc, Unauthorized):
        assert answer.headers["www-authenticate"] == "Bearer"
    if kind is HTTPException and status == 405:
        assert answer.headers["allow"] == "POST"


def _stored_bytes_refusals() -> float:
    return REGISTRY.get_sample_value("featurehash_quota_refusals_total",
                                     {"tenant": READER.tenant, "limit": "stored_bytes"}) or 0.0


def test_only_an_unexpected_redis_error_is_logged_and_stored_bytes_refusals_are_counted(caplog):
    before = _stored_bytes_refusals()
    with caplog.at_level(logging.ERROR, logger="featurehash"):
        answers = asyncio.run(_answers(_app()))
    assert _stored_bytes_refusals() - before == len(SAMPLES[StoredBytesExceeded]) + len(SAMPLES[MapBytesExceeded])
    logged = [record for record in caplog.records if record.name == "featurehash"]
    assert [record.getMessage() for record in logged] == ["Redis answered an error"]
    assert isinstance(logged[0].exc_info[1], ResponseError) and str(logged[0].exc_info[1]).startswith("WRONGTYPE")
    assert sum(answer.status_code == 500 for answer in answers) == 1
