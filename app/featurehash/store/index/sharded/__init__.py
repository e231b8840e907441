"""The sharded layout: one index over S layout-3 shards, each under a hash tag of its own
(featurehash.store.index.sharded.placement), written and queried side by side (steps.ShardedSteps)."""
