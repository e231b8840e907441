"""Corpus deduplication: files in, a clean corpus out (`dedup_corpus`, the body of `featurehash dedup` for
corpora, and what the Spark, Ray and Dask adapters run per file and on their driver).

Modules, in the order a run uses them: `files` (paths, folders, globs, URLs; format and compression from the
name), `records` (one file's records with their line numbers), `normalise` (normalised text, its 128-bit hash,
a document's input rows), `scan` (the read stage of one file as Arrow), `near` (the near-duplicate join of the
exact representatives; `sets` its path for the default minhash, from documents to codes with no sparse rows),
`decide` (clusters and the keep policy), `kept` (the kept records re-read, as read
or converted), `writing` (sharded output), `stages` (the work directory, resume markers, clocks), `pipeline`
(`dedup_corpus`); `distributed` is what the engine adapters run per file and on their driver."""

from .decide import Decision, decide, exact_representatives, parse_keep
from .files import CorpusFile, expand
from .normalise import default_spec, document_rows, hash128, normalise
from .pipeline import dedup_corpus
from .records import Fields
from .scan import ScanCounts, scan_table

__all__ = ["CorpusFile", "Decision", "Fields", "ScanCounts", "decide", "dedup_corpus", "default_spec",
           "document_rows", "exact_representatives", "expand", "hash128", "normalise", "parse_keep", "scan_table"]
