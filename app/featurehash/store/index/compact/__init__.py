"""Layout 3 of an LSH index: `keys` (the key layout, partitioned buckets), `scripts` (its Lua scripts), `kernels`
(the client's compiled steps), `steps` (the layout's hooks), `probe` (a query's bounded probe and candidate pool)
and `near/` (the opt-in near cache: a local replica whose probe answers queries)."""
