"""One LSH index in Redis: `handles` (LSHIndex, AsyncLSHIndex: the layout chosen when an index is opened),
the operations written once over a layout's hooks (`state.LayoutSteps`): `queries`, `writes`, `duplicates`;
the layouts: `keyed` (1 and 2) and `compact/` (3: keys, scripts, kernels, steps, probe, and `near/`, its near
cache, a wrapper of its hooks)."""
