"""An index's answers as one digest, to compare checkouts and layouts: bit-identical or not.

    python bench/index_answers.py build PREFIX [--layout 3] [--shards N] [--vectors]
    python bench/index_answers.py answer PREFIX
    python bench/index_answers.py migrate PREFIX [--shards N]
    python bench/index_answers.py drop PREFIX

`build` creates the index "answers" under key prefix PREFIX in a Redis (REDIS_URL, default 127.0.0.1:6379/0)
and adds the same 3,000 gcws rows (log-normal weights, a fifth near copies); `answer` opens the stored index
and prints the digest of its answers: 100 queries by vector and 100 by stored id (top 10, ids and similarities
as stored floats), widened queries at target recall 0.95, and the duplicate clusters (components and representatives).
Run `build` under one checkout (PYTHONPATH=<checkout>/app) and `answer` under another to check that an index a
release wrote answers the same after an upgrade, or `migrate` then `answer` to check a migration.
"""

from __future__ import annotations

import argparse
import hashlib
import os

import numpy as np
import orjson
import redis
from featurehash.maps import create_map
from featurehash.store import LSHIndexes

SPEC = {"method": "gcws", "input_dim": 32, "n_components": 128, "seed": 11}
NAME = "answers"


def rows(n: int = 3000, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.0, 2.0, (n - n // 5, 32)).astype(np.float32) + 0.01
    copies = base[rng.integers(0, len(base), n // 5)] * (1 + 0.05 * rng.random((n // 5, 32))).astype(np.float32)
    return np.vstack([base, copies])


def answers(index) -> dict:
    X = rows()
    queries = X[::30]
    ids = [f"doc-{i}" for i in range(0, len(X), 30)]
    out = {}
    for label, result in (("vectors", index.query(queries, top_k=10)),
                          ("ids", index.query_items(ids, top_k=10)),
                          ("widened", index.query(queries, top_k=10, target_recall=0.95))):
        out[label] = [[(item, float(similarity).hex()) for item, similarity in row] for row in result.results]
    for mode in ("components", "representatives"):
        found = index.duplicates(mode=mode)
        out[f"duplicates/{mode}"] = [(cluster.representative, cluster.members) for cluster in found.clusters]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "answer", "migrate", "drop"))
    parser.add_argument("prefix")
    parser.add_argument("--layout", type=int, default=None)
    parser.add_argument("--shards", type=int, default=None)
    parser.add_argument("--vectors", action="store_true", help="store vectors (exact ranking)")
    args = parser.parse_args()
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    indexes = LSHIndexes(client, key_prefix=args.prefix)
    feature_map = create_map(SPEC)
    if args.action == "drop":
        keys = list(client.scan_iter(f"{args.prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.unlink(*keys[start:start + 500])
        print(f"dropped {len(keys)} keys")
        return
    if args.action == "build":
        options = {"name": NAME, "threshold": 0.7}
        options.update({key: value for key, value in (("layout", args.layout), ("shards", args.shards))
                        if value is not None})
        if args.vectors:
            options["vectors"] = "float32"
        index = indexes.create(feature_map, **options)
        X = rows()
        index.add([f"doc-{i}" for i in range(len(X))], X)
    elif args.action == "migrate":
        indexes.migrate(NAME, **({"shards": args.shards} if args.shards else {}))
    index = indexes.open(NAME, feature_map)
    found = answers(index)
    digest = hashlib.sha256(orjson.dumps(found, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    parts = {label: hashlib.sha256(orjson.dumps(value)).hexdigest()[:6] for label, value in found.items()}
    print(f"layout {index.config.layout} shards {getattr(index.config, 'shards', None)}: answers {digest} {parts}")


if __name__ == "__main__":
    main()
