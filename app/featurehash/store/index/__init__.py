"""One LSH index in Redis: `handles` (LSHIndex, AsyncLSHIndex: the layout chosen when an index is opened),
the operations written once over a layout's hooks (`state.LayoutSteps`): `queries`, `writes`, `duplicates`;
the layouts: `keyed` (1 and 2), `compact/` (3: keys, scripts, kernels, steps, probe, and `near/`, its near
cache, a wrapper of its hooks) and `sharded/` (S layout-3 shards under hash tags of their own); `migration`
moves an index into the sharded layout while it serves."""
