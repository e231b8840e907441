"""A corpus deduplication as the Spark, Ray and Dask adapters run it, with no engine imported: the driver's steps
in order (`CorpusRun`), around the three things an engine does in parallel: scan each file
(`featurehash.dedup.corpus.distributed.scan_file`), join the near-duplicate rows (the engine's
`similarity_join` on the positions `CorpusRun.plan.near_rows` names, their normalised text as the column), and
write each file's kept records (`write_file`). Same inputs and options as `featurehash.dedup.corpus.dedup_corpus`,
same kept set and duplicates table (by id)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ..dedup.corpus import expand, parse_keep
from ..dedup.corpus.distributed import SMALL, Plan, open_output, text_similarities
from ..dedup.corpus.pipeline import fields_and_map
from ..dedup.corpus.remote import is_url
from ..dedup.corpus.vectors import VectorFields
from ..maps import InputError, create_map


class CorpusRun:
    """One run: `files` (reference files first), `fields`, `spec`; then `planned(small, counts)`,
    `decided(a, b, similarity)` -> the positions whose texts `similarities` needs, `finished(shards)`."""

    def __init__(self, inputs, output, *, threshold=0.7, spec=None, weighted=False, target_recall=0.95,
                 keep="first", text_field="text", id_field=None, input_format=None, text_unit="line",
                 on_error="raise", shard_rows=100_000, output_format=None, reference=None, force=False,
                 vector_field=None, tokens_field=None):
        _, key_field = parse_keep(keep)
        if is_url(output):   # the workers write their shards themselves: a path they all see, not a staging copy
            raise InputError("output", "an engine writes to a local or shared path; stage a URL output with "
                                       "featurehash.dedup.corpus.dedup_corpus")
        if not 0.0 < threshold <= 1.0:
            raise InputError("threshold", "must lie in (0, 1]")
        self.fields, feature_map = fields_and_map(text_field, id_field, key_field, text_unit, vector_field,
                                                  tokens_field, spec, weighted)
        self.spec = feature_map.spec.model_dump() if spec is None else spec
        self.kind = self.fields.kind if isinstance(self.fields, VectorFields) else "text"
        self.new = expand(inputs, input_format)
        self.old = expand(reference, input_format) if reference else []
        self.files = self.old + self.new
        self.output, self.keep, self.on_error, self.shard_rows = str(output), keep, on_error, shard_rows
        self.output_format = output_format
        self.threshold, self.target_recall = float(threshold), float(target_recall)
        options = {"threshold": threshold, "spec": feature_map.spec.id, "keep": keep, "on_error": on_error,
                   "fields": repr(self.fields)}
        open_output(self.output, self.files, options, force).remove()   # refusals as one machine's
        self.stages: dict[str, dict] = {}
        self._clock = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.stages[stage] = {"wall_s": round(now - self._clock, 3)}
        self._clock = now

    def planned(self, small: pa.Table, counts: list[dict]) -> Plan:
        self.counts = counts
        self.plan = Plan(small.select(list(SMALL)), len(self.files), len(self.old))
        return self.plan

    def decided(self, a, b, similarity) -> np.ndarray:
        """Clusters and keep policy; the positions whose texts are needed for the missing similarities."""
        self.decision = self.plan.decide(np.asarray(a), np.asarray(b), np.asarray(similarity), self.keep)
        self.missing, self.x, self.y = self.plan.missing_pairs(self.decision)
        return np.unique(np.concatenate([self.x, self.y]))

    def similarities(self, positions: np.ndarray, texts: list[str]) -> None:
        by_position = dict(zip(np.asarray(positions).tolist(), texts))
        self.decision.similarity[self.missing] = text_similarities(
            self.spec, [by_position[p] for p in self.x.tolist()], [by_position[p] for p in self.y.tolist()],
            self.kind)

    def write_plan(self) -> list[tuple[int, object, list[int]]]:
        """(file index, file, kept record numbers) of each new file."""
        return [(k, f, self.plan.kept_numbers(self.decision, k)) for k, f in enumerate(self.files)
                if k >= len(self.old)]

    def finished(self, shards: list[str], engine: str) -> dict:
        options = {"threshold": self.threshold, "keep": self.keep, "spec_id": create_map(self.spec).spec.id,
                   "engine": engine}
        return self.plan.finish(self.decision, self.output, self.counts, shards, len(self.new), options, self.stages)
