"""A client generated from the served OpenAPI document (openapi-python-client, offline, no post hooks)
calls every operation through a real server; its answers equal the hand-written client's."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from featurehash.client import FeatureHashClient

GENERATOR = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent)) \
    or shutil.which("openapi-python-client")
pytestmark = pytest.mark.skipif(GENERATOR is None, reason="openapi-python-client is not installed (test extra)")
PACKAGE = "fh_generated"


@pytest.fixture(scope="module")
def generated(embedded_server, tmp_path_factory):
    """The generated package, imported from a temporary directory."""
    work = tmp_path_factory.mktemp("generated-client")
    with embedded_server.client() as http:
        (work / "openapi.json").write_text(json.dumps(http.get("/openapi.json").json()))
    (work / "config.yml").write_text(f"post_hooks: []\nproject_name_override: {PACKAGE}\n"
                                     f"package_name_override: {PACKAGE}\n")
    done = subprocess.run([GENERATOR, "generate", "--path", str(work / "openapi.json"), "--config",
                           str(work / "config.yml"), "--meta", "none", "--output-path", str(work / PACKAGE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(work))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(work))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def _operations(package) -> set[str]:
    api = Path(package.__file__).parent / "api"
    return {f"{tag.name}.{module.stem}" for tag in api.iterdir() if tag.is_dir()
            for module in tag.glob("*.py") if module.stem != "__init__"}


def test_every_generated_operation_answers_like_the_hand_written_client(generated, embedded_server):
    called: set[str] = set()

    def call(operation: str, *args, **kwargs):
        called.add(operation)
        module = importlib.import_module(f"{PACKAGE}.api.{operation}")
        return module.sync_detailed(*args, client=client, **kwargs)

    def model(name: str, document: dict):
        return getattr(importlib.import_module(f"{PACKAGE}.models"), name).from_dict(document)

    client = generated.AuthenticatedClient(base_url=embedded_server.url, token="no-key-set",
                                           raise_on_unexpected_status=True)
    suffix = uuid.uuid4().hex[:8]
    X = np.random.default_rng(9).random((5, 6))
    rows = X.tolist()
    with FeatureHashClient(embedded_server.url) as fh:
        gcws_request = {"method": "gcws", "input_dim": 6, "n_components": 8, "seed": 77, "params": {"bits": 2}}
        created = call("maps.create_map", body=model("CreateMapRequest", gcws_request))
        assert created.status_code in (200, 201)
        gcws = created.parsed.to_dict()
        assert gcws == fh.create_map("gcws", 6, 8, seed=77, params={"bits": 2})
        rff = call("maps.create_map", body=model("CreateMapRequest", {"method": "rff", "input_dim": 6,
                                                                      "n_components": 16, "seed": 78})).parsed
        assert call("maps.get_map", gcws["id"]).parsed.to_dict() == fh.get_map(gcws["id"])
        page = call("maps.list_maps", limit=1000).parsed.to_dict()
        assert page == fh.list_maps(limit=1000)

        dense = call("features.transform", rff.id, body=model("VectorsRequest", {"vectors": rows})).parsed
        np.testing.assert_array_equal(np.asarray(dense.features, dtype=np.float32), fh.transform(rff.id, X))
        one_hot = call("features.transform", gcws["id"], body=model("VectorsRequest", {"vectors": rows})).parsed
        expected = fh.transform(gcws["id"], X)
        np.testing.assert_array_equal(one_hot.indices, expected.indices)
        assert (one_hot.dim, one_hot.scale) == (expected.dim, expected.scale)
        hashed = call("features.hash_vectors", gcws["id"], body=model("HashRequest", {"vectors": rows}),
                      bands=4).parsed
        codes, keys = fh.hash(gcws["id"], X, bands=4)
        np.testing.assert_array_equal(hashed.codes, codes)
        assert hashed.band_keys == keys.tolist()
        kernel = call("features.kernel", rff.id, body=model("KernelRequest", {"x": rows})).parsed
        np.testing.assert_array_equal(kernel.estimate, fh.kernel(rff.id, X).estimate)

        name = f"generated-{suffix}"
        index = call("indexes.create_index", body=model("CreateIndexRequest", {"map_id": gcws["id"], "name": name,
                                                                             "bands": 4, "rows": 2}))
        assert index.status_code == 201 and index.headers["Location"] == f"/v1/indexes/{name}"
        ids = [f"item {i}?#%" for i in range(5)]  # a path segment only when percent-encoded
        added = call("indexes.add_items", name, body=model("AddItemsRequest", {"ids": ids, "vectors": rows})).parsed
        assert added.to_dict() == {"added": 5, "replaced": 0, "items": 5}
        assert call("indexes.get_index", name).parsed.to_dict() == fh.get_index(name)
        listed = call("indexes.list_indexes", limit=1000).parsed.to_dict()
        assert listed == fh.list_indexes(limit=1000)
        found = call("indexes.query_index", name, body=model("IndexQueryRequest", {"vectors": rows, "top_k": 2}))
        assert found.parsed.to_dict() == fh.query_index(name, X, top_k=2)
        by_ids = call("indexes.query_index", name, body=model("IndexQueryRequest", {"ids": ids[:2], "top_k": 2}))
        assert by_ids.parsed.to_dict() == fh.query_items(name, ids[:2], top_k=2)
        clusters = call("indexes.find_duplicates", name, body=model("DuplicatesRequest", {"threshold": 0.5}))
        assert clusters.parsed.to_dict() == fh.duplicates(name, 0.5)
        removed = call("indexes.delete_items", name, body=model("DeleteItemsRequest", {"ids": ids[:2] + ["none"]}))
        assert removed.parsed.to_dict() == {"removed": 2, "missing": ["none"]}
        assert call("indexes.delete_item", name, ids[4]).status_code == 204
        assert fh.get_index(name)["items"] == 2
        refused = call("maps.delete_map", gcws["id"])
        assert refused.status_code == 409 and refused.parsed.field == "map_id"
        assert call("indexes.delete_index", name).status_code == 204
        assert call("maps.delete_map", gcws["id"]).status_code == 204
        missing = call("maps.get_map", gcws["id"])
        assert missing.status_code == 404 and missing.parsed.to_dict() == {
            "detail": f"map_id: no map with id {gcws['id']!r}", "field": "map_id"}

        assert call("health.healthz").parsed.to_dict() == fh.healthz()
        assert call("health.readyz").parsed.status == fh.readyz()["status"] == "ready"
        assert "featurehash_requests_total" in call("health.metrics").parsed
        assert call("tenants.list_tenants").parsed.tenants == fh.list_tenants()  # an open server: all admin
    assert called == _operations(generated)
