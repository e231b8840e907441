"""The near cache of a layout-3 index: `cache` (the replica kept coherent, and NearCachedSteps, the wrapper of
layout 3's hooks whose probe reads it), `table` (its compiled table), `lookup` (its compiled probe)."""
