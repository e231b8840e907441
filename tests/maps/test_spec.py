"""Specs: defaults, identity, validation errors, and bit-identical rebuilds in a fresh process."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from featurehash.maps import FORMAT_VERSION, MapSpec, SpecError, create_map, resolve_spec

BASE = {"rff": {"method": "rff", "input_dim": 6, "n_components": 16, "seed": 3},
        "nrff": {"method": "nrff", "input_dim": 6, "n_components": 16, "seed": 3},
        "gcws": {"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 3}}


def with_params(method: str, **params) -> dict:
    return {**BASE[method], "params": params}


# ---------------------------------------------------------------------------------------
# defaults
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, expected", [
    ("rff", {"kernel": "gaussian", "gamma": 1.0, "variant": "cos_sin"}),
    ("nrff", {"gamma": 1.0, "variant": "phase"}),
    ("gcws", {"power": 1.0, "bits": 8, "zero_bit": False, "bit_source": "mixed_code"}),
])
def test_defaults_are_resolved(method, expected):
    spec = resolve_spec({"method": method, "input_dim": 4, "n_components": 8})
    assert spec.seed == 0
    assert spec.params == expected
    document = spec.to_dict()
    assert document["params"] == expected and document["seed"] == 0
    assert document["format_version"] == FORMAT_VERSION
    assert document["id"] == spec.id
    # Partially given params are completed, given ones kept.
    partial = resolve_spec({"method": method, "input_dim": 4, "n_components": 8,
                            "params": {"gamma": 2.5} if method != "gcws" else {"bits": 4}})
    assert set(partial.params) == set(expected)


def test_defaults_give_the_same_id_as_explicit_values():
    implicit = resolve_spec({"method": "rff", "input_dim": 4, "n_components": 8})
    explicit = resolve_spec({"method": "rff", "input_dim": 4, "n_components": 8, "seed": 0,
                             "params": {"kernel": "gaussian", "gamma": 1.0, "variant": "cos_sin"}})
    assert implicit.id == explicit.id
    assert resolve_spec({"method": "rff", "input_dim": 4, "n_components": 8, "params": None}).id == implicit.id


def test_output_dim_is_reported():
    assert create_map(with_params("rff")).describe()["output_dim"] == 16
    assert create_map(with_params("gcws", bits=4)).describe()["output_dim"] == 16 * 2**4


# ---------------------------------------------------------------------------------------
# identity
# ---------------------------------------------------------------------------------------

def test_same_spec_same_id():
    a = create_map(with_params("rff", gamma=1, kernel="laplacian"))
    b = create_map(with_params("rff", gamma=1.0, kernel="laplacian"))
    reordered = {"params": {"kernel": "laplacian", "gamma": 1.0}, "seed": 3, "n_components": 16,
                 "input_dim": 6, "method": "rff"}
    c = create_map(reordered)
    assert a.spec.id == b.spec.id == c.spec.id
    assert a.spec == b.spec == c.spec
    assert a.spec.canonical_json() == c.spec.canonical_json()
    # A MapSpec is accepted as is.
    assert create_map(a.spec).spec.id == a.spec.id
    # Equal spec, equal numbers.
    X = np.random.default_rng(0).standard_normal((3, 6))
    assert a.transform(X).tobytes() == c.transform(X).tobytes()


def test_gcws_int_and_float_power_share_an_id():
    assert create_map(with_params("gcws", power=1)).spec.id == create_map(with_params("gcws", power=1.0)).spec.id


def test_different_content_different_id():
    variants = [
        with_params("rff"),
        {**with_params("rff"), "seed": 4},
        {**with_params("rff"), "input_dim": 7},
        {**with_params("rff"), "n_components": 18},
        with_params("rff", gamma=0.5),
        with_params("rff", gamma=1.0 + 2**-52),  # the id sees every bit of a float
        with_params("rff", kernel="laplacian"),
        with_params("rff", variant="phase"),
        with_params("nrff"),
        with_params("nrff", variant="cos_sin"),
        with_params("gcws"),
        with_params("gcws", zero_bit=True),
        with_params("gcws", bits=4),
        with_params("gcws", power=0.5),
    ]
    ids = [create_map(spec).spec.id for spec in variants]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("method", ["rff", "nrff", "gcws"])
def test_id_names_method_and_format_version(method):
    spec = create_map(BASE[method]).spec
    assert spec.id.startswith(f"{method}-v{FORMAT_VERSION}-")
    digest = spec.id.rsplit("-", 1)[1]
    assert len(digest) >= 16 and all(ch in "0123456789abcdef" for ch in digest)
    assert json.loads(spec.canonical_json())["format_version"] == FORMAT_VERSION
    # The id is the hash of the canonical JSON, which includes the format version.
    assert digest == hashlib.sha256(spec.canonical_json()).hexdigest()[:len(digest)]


@pytest.mark.parametrize("method", ["rff", "nrff", "gcws"])
def test_resolved_spec_round_trips(method):
    m = create_map(with_params(method))
    document = json.loads(json.dumps(m.spec.to_dict()))
    again = resolve_spec(document)
    assert again.id == m.spec.id and again == m.spec
    # The document the service returns (with output_dim) round-trips as well.
    described = json.loads(json.dumps(m.describe()))
    assert resolve_spec(described).id == m.spec.id
    assert create_map(described).spec.id == m.spec.id


@pytest.mark.parametrize("tamper", [
    lambda d: d.update(seed=d["seed"] + 1),
    lambda d: d.update(n_components=d["n_components"] + 2),
    lambda d: d["params"].update(gamma=0.25),
])
def test_stale_id_is_refused(tamper):
    document = create_map(with_params("rff")).spec.to_dict()
    tamper(document)
    with pytest.raises(SpecError) as info:
        resolve_spec(document)
    assert info.value.field == "id"
    assert document["id"] in info.value.message


def test_unknown_id_is_refused():
    document = create_map(with_params("nrff")).spec.to_dict()
    document["id"] = "nrff-v1-000000000000000000000000"
    with pytest.raises(SpecError) as info:
        create_map(document)
    assert info.value.field == "id"


# ---------------------------------------------------------------------------------------
# validation errors name the field
# ---------------------------------------------------------------------------------------

BAD_SPECS = [
    ({"method": "nope", "input_dim": 4, "n_components": 8}, "method"),
    ({"input_dim": 4, "n_components": 8}, "method"),
    ({"method": None, "input_dim": 4, "n_components": 8}, "method"),
    ({"method": "rff", "input_dim": 0, "n_components": 8}, "input_dim"),
    ({"method": "rff", "input_dim": -3, "n_components": 8}, "input_dim"),
    ({"method": "rff", "input_dim": 4.5, "n_components": 8}, "input_dim"),
    ({"method": "rff", "input_dim": "many", "n_components": 8}, "input_dim"),
    ({"method": "rff", "n_components": 8}, "input_dim"),
    ({"method": "rff", "input_dim": 4, "n_components": 0}, "n_components"),
    ({"method": "rff", "input_dim": 4, "n_components": 2**40}, "n_components"),
    ({"method": "rff", "input_dim": 4}, "n_components"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "seed": -1}, "seed"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "seed": 2**64}, "seed"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "colour": "red"}, "colour"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": [1, 2]}, "params"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"gamma": 0}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"gamma": -1.0}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"gamma": math.nan}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"gamma": math.inf}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"gamma": "wide"}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"kernel": "cauchy"}}, "params.kernel"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"variant": "sin"}}, "params.variant"),
    ({"method": "rff", "input_dim": 4, "n_components": 8, "params": {"sigma": 1.0}}, "params.sigma"),
    ({"method": "nrff", "input_dim": 4, "n_components": 8, "params": {"gamma": 0.0}}, "params.gamma"),
    ({"method": "nrff", "input_dim": 4, "n_components": 8, "params": {"gamma": math.nan}}, "params.gamma"),
    ({"method": "nrff", "input_dim": 4, "n_components": 8, "params": {"kernel": "gaussian"}}, "params.kernel"),
    ({"method": "gcws", "input_dim": 4, "n_components": 8, "params": {"power": 0}}, "params.power"),
    ({"method": "gcws", "input_dim": 4, "n_components": 8, "params": {"power": math.nan}}, "params.power"),
    ({"method": "gcws", "input_dim": 4, "n_components": 8, "params": {"bits": 0}}, "params.bits"),
    ({"method": "gcws", "input_dim": 4, "n_components": 8, "params": {"bits": 40}}, "params.bits"),
    ({"method": "gcws", "input_dim": 4, "n_components": 8, "params": {"gamma": 1.0}}, "params.gamma"),
    ({"method": "rff", "input_dim": 4, "n_components": 7}, "n_components"),
]


@pytest.mark.parametrize("spec, field", BAD_SPECS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_SPECS)])
def test_bad_spec_names_the_field(spec, field):
    with pytest.raises(SpecError) as info:
        create_map(spec)
    error = info.value
    assert error.field == field
    assert isinstance(error, ValueError)
    assert error.message and str(error).startswith(f"{field}: ")


def test_spec_must_be_an_object():
    with pytest.raises(SpecError) as info:
        resolve_spec([("method", "rff")])
    assert info.value.field == "spec"


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(SpecError) as info:
        create_map({"method": "RFF", "input_dim": 4, "n_components": 8})
    assert "rff" in info.value.message and "gcws" in info.value.message


def test_mapspec_is_frozen():
    spec = create_map(BASE["rff"]).spec
    assert isinstance(spec, MapSpec)
    with pytest.raises(Exception):
        spec.seed = 5


# ---------------------------------------------------------------------------------------
# the same spec gives the same bits in a fresh process
# ---------------------------------------------------------------------------------------

FRESH_PROCESS_SCRIPT = r"""
import hashlib, json, sys
import numpy as np
from featurehash.maps import create_map

job = json.load(sys.stdin)
X = np.array(job["x"], dtype=np.float64)
out = {}
for name, spec in job["specs"].items():
    m = create_map(spec)
    entry = {"id": m.spec.id}
    if spec["method"] == "gcws":
        entry["hash"] = hashlib.sha256(m.hash(np.abs(X) + X).tobytes()).hexdigest()
        entry["hash_signed"] = hashlib.sha256(m.hash(X).tobytes()).hexdigest()
        entry["indices"] = hashlib.sha256(m.transform(X).indices.tobytes()).hexdigest()
    else:
        entry["float32"] = hashlib.sha256(m.transform(X).tobytes()).hexdigest()
        entry["float64"] = hashlib.sha256(m.transform(X, dtype=np.float64).tobytes()).hexdigest()
    out[name] = entry
print(json.dumps(out))
"""


def fingerprints(specs: dict, X: np.ndarray) -> dict:
    out = {}
    for name, spec in specs.items():
        m = create_map(spec)
        entry = {"id": m.spec.id}
        if spec["method"] == "gcws":
            entry["hash"] = hashlib.sha256(m.hash(np.abs(X) + X).tobytes()).hexdigest()
            entry["hash_signed"] = hashlib.sha256(m.hash(X).tobytes()).hexdigest()
            entry["indices"] = hashlib.sha256(m.transform(X).indices.tobytes()).hexdigest()
        else:
            entry["float32"] = hashlib.sha256(m.transform(X).tobytes()).hexdigest()
            entry["float64"] = hashlib.sha256(m.transform(X, dtype=np.float64).tobytes()).hexdigest()
        out[name] = entry
    return out


def test_bitwise_identical_output_in_a_fresh_process():
    d = 12
    rng = np.random.default_rng(99)
    X = rng.standard_normal((9, d))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[:, 0] = np.abs(X[:, 0]) + 0.5  # no all-zero rows (GCWS, NRFF)
    specs = {
        "rff": create_map({"method": "rff", "input_dim": d, "n_components": 64, "seed": 17,
                           "params": {"gamma": 0.3}}).spec.to_dict(),
        "rff_phase_laplacian": create_map({"method": "rff", "input_dim": d, "n_components": 33, "seed": 2**40,
                                           "params": {"kernel": "laplacian", "variant": "phase"}}).spec.to_dict(),
        "nrff": create_map({"method": "nrff", "input_dim": d, "n_components": 64, "seed": 5,
                            "params": {"gamma": 2.0}}).spec.to_dict(),
        "gcws": create_map({"method": "gcws", "input_dim": d, "n_components": 32, "seed": 8,
                            "params": {"bits": 6}}).spec.to_dict(),
        "gcws_p": create_map({"method": "gcws", "input_dim": d, "n_components": 32, "seed": 8,
                              "params": {"power": 0.5, "zero_bit": True}}).spec.to_dict(),
    }
    # json floats round-trip exactly (repr), so the child sees the very same input bits.
    job = json.dumps({"specs": specs, "x": X.tolist()})
    assert np.array_equal(np.array(json.loads(job)["x"]), X)
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS_SCRIPT], input=job, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    assert child == fingerprints(specs, X)
    assert {name: entry["id"] for name, entry in child.items()} == {name: s["id"] for name, s in specs.items()}
