"""The `featurehash` command line.

    featurehash --version
    featurehash serve [--host H] [--port P] [--workers N] [--data-dir DIR]
    featurehash repair-aof [--data-dir DIR]          # truncate a corrupt embedded append-only file (keeps a copy)
    featurehash spec SPEC.json                      # print the resolved spec with its id
    featurehash new-key --name N --tenant T --scope read [--scope write]   # a new API key and its keys-file entry
    featurehash transform --spec SPEC.json --input X.npy --output Z.npy [--float64] [--chunk-rows N] [--quiet]
    featurehash hash --spec SPEC.json --input X.npy --output codes.npy [--chunk-rows N] [--quiet]
    featurehash dedup X.npy|X.npz|X.jsonl|X.txt --spec SPEC.json --threshold T [--target-recall R] [--verify exact|codes]
        [--memory-budget 2GB] --pairs OUT.npz|OUT.parquet [--clusters OUT.npy]
        [--mode components|representatives] [--progress/--no-progress]   # featurehash.dedup.command
    featurehash dedup PATH... --output DIR [--threshold 0.7] [--spec SPEC.json | --weighted] [--keep first]
        [--id-field F] [--text-field text | --vector-field F | --tokens-field F] [--on-error raise|skip]
        [--reference CLEAN... | --against-index NAME --redis-url URL [--add-to-index]] [--memory-budget 2GB]
        [--work-dir DIR] [--force]   # a corpus of files in, a deduplicated corpus out (DIR or an fsspec URL)

Outputs are .npy files: a name without the suffix gets it (as with numpy.save), and the name written is
reported. Bad input (a missing or unreadable file, text, pickled objects, a dense .npz, a wrong
dimension, an invalid spec) is one line on stderr naming the file and the problem, exit code 2.
`transform` writes dense features for dense maps; for one-hot maps (GCWS, binning) it writes the
one-hot indices (int64, n x k) and prints `dim` and `scale` as JSON on stdout.
Inputs may be a 2-D .npy array (memory-mapped: it may be larger than memory) or a scipy sparse
.npz matrix; the output is written chunk by chunk (`--chunk-rows`), with a progress bar on a
terminal (`--quiet`: none), in memory bounded by the chunk (`featurehash.npy.stream`).
Text, for a spec that reads it (method "hashing", or `input: {"hashing": ...}`): a .jsonl file (each line a
JSON string, a list of tokens or an object {token: weight}) or a .txt file (one document per line); a bad
line is one error naming its line number. The hashing map's features are sparse: written as a scipy CSR .npz
(`featurehash.npy.text_stream`).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import orjson

from . import __version__

# numpy, scipy and numba (featurehash.maps) are imported by the commands that compute, not by the
# launcher (`serve`, `repair-aof`): they cost it seconds of start-up before Redis and the web tier.

BAD_INPUT = 2  # as argparse exits for a bad command line


class UsageError(Exception):
    """A bad command line or setting: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (its usage is a --help away), exit code 2."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _shard_count(text: str) -> int | str:
    return "auto" if text == "auto" else _positive_int(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


SERVE_OPTIONS = ("host", "port", "workers", "data_dir")


def _settings(**overrides):
    """The service settings (environment, then the command line's overrides); a bad one is a UsageError."""
    from pydantic import ValidationError

    from .service.config import Settings

    try:
        return Settings(**{name: value for name, value in overrides.items() if value is not None})
    except ValidationError as exc:
        problem = exc.errors()[0]
        name = ".".join(str(part) for part in problem["loc"])
        flag = f"--{name.replace('_', '-')} or " if name in SERVE_OPTIONS else ""
        raise UsageError(f"setting {name} ({flag}FEATUREHASH_{name.upper()}): {problem['msg']}, "
                         f"got {problem.get('input')!r}") from None


def _load_spec(path: str) -> dict:
    from .maps import InputError

    try:
        return orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "not a file") from None
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON ({exc})") from None


def _map_from(path: str):
    from .maps import create_map

    with _naming(path):
        return create_map(_load_spec(path))


@contextmanager
def _naming(path: str):
    """A FeatureHashError about a file's content, with the file named in front of its field."""
    from .maps import FeatureHashError

    try:
        yield
    except FeatureHashError as exc:
        if exc.field == path:
            raise
        raise type(exc)(f"{path}: {exc.field}", exc.message) from None


def _npy_name(path: str, suffix: str = ".npy") -> str:
    """Where the output goes: like numpy.save, a name without the suffix (.npy; .npz for sparse) gets it."""
    return path if path.endswith(suffix) else f"{path}{suffix}"


def _print_json(document) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")


def _cmd_spec(args) -> None:
    _print_json(_map_from(args.spec).describe())


def _stream(args, *, codes: bool):
    import numpy as np

    from .maps import InputError, UnsupportedOperation
    from .npy.stream import stream

    feature_map = _map_from(args.spec)
    dtype = np.float64 if getattr(args, "float64", False) else None
    if codes and not feature_map.has_hash:
        raise UnsupportedOperation(f"{args.spec}: method", f"'{feature_map.method}' maps have no discrete codes; "
                                   "use transform")
    from .npy.text_stream import is_text_file, stream_text, writes_sparse

    text = is_text_file(args.input)
    sparse = text and writes_sparse(feature_map, codes)
    if sparse and args.output.endswith(".npy"):
        raise InputError(args.output, f"'{feature_map.method}' features are sparse: they are written as a scipy "
                                      "CSR .npz; name the output .npz")
    args.output = _npy_name(args.output, ".npz" if sparse else ".npy")
    if not Path(args.output).parent.is_dir():
        raise InputError(args.output, "cannot be written: its directory does not exist")
    with _naming(args.input):
        result = (stream_text if text else stream)(feature_map, args.input, args.output, codes=codes, dtype=dtype,
                                                   chunk_rows=args.chunk_rows, progress=False if args.quiet else None)
    return feature_map, result


def _cmd_transform(args) -> None:
    feature_map, result = _stream(args, codes=False)
    if result.one_hot is not None:
        _print_json({"id": feature_map.spec.id, "indices": args.output, "dim": result.one_hot.dim,
                     "scale": result.one_hot.scale})
    elif args.output.endswith(".npz"):
        _print_json({"id": feature_map.spec.id, "sparse_features": args.output, "shape": list(result.shape),
                     "dtype": result.dtype})
    else:
        _print_json({"id": feature_map.spec.id, "features": args.output, "shape": list(result.shape),
                     "dtype": result.dtype})


def _cmd_hash(args) -> None:
    feature_map, result = _stream(args, codes=True)
    _print_json({"id": feature_map.spec.id, "codes": args.output, "shape": list(result.shape)})


def _cmd_dedup(args) -> None:
    from .dedup.command import check_rows_mode, run, run_corpus

    if args.output is not None:
        spec = _load_spec(args.spec) if args.spec else None
        if args.against_index is None:
            _print_json(run_corpus(args, spec))
            return
        import redis

        from .store import IndexNotFound, LSHIndexes

        url = args.redis_url or os.environ.get("REDIS_URL")
        if not url:
            raise UsageError("--redis-url (or REDIS_URL): the Redis --against-index lives in")
        connection = redis.Redis.from_url(url)
        try:
            index = LSHIndexes(connection, args.key_prefix).open(args.against_index)
        except IndexNotFound:
            raise UsageError(f"--against-index: no index {args.against_index!r} under key prefix "
                             f"{args.key_prefix!r}") from None
        try:
            _print_json(run_corpus(args, spec, index))
        finally:
            connection.close()
        return
    check_rows_mode(args)
    # text files too are the library join's to read (featurehash.maps.text.streams, in blocks)
    _print_json(run(_map_from(args.spec), args))


def _cmd_warm_cache(args) -> None:
    from .service.compile_cache import main as warm

    _print_json(warm())


def _cmd_migrate_index(args) -> None:
    """Move an index into the sharded layout while it serves; run again after a crash to resume."""
    import os

    import redis

    from .store import IndexNotFound, LSHIndexes

    url = args.redis_url or os.environ.get("REDIS_URL")
    if not url:
        raise UsageError("--redis-url (or REDIS_URL): the Redis the index lives in")
    connection = redis.Redis.from_url(url)
    bar = None
    if not args.quiet:
        try:
            from tqdm import tqdm
            bar = tqdm(desc=f"migrating {args.name}", unit=" items")
        except ImportError:
            pass

    def progress(moved: int) -> None:
        if bar is not None:
            bar.update(moved - bar.n)

    try:
        indexes = LSHIndexes(connection, args.key_prefix, tenant=args.tenant)
        _print_json(indexes.migrate(args.name, shards=args.shards, expected_items=args.expected_items,
                                    progress=progress))
    except IndexNotFound:
        raise UsageError(f"no index {args.name!r} under key prefix {args.key_prefix!r} (tenant {args.tenant})") \
            from None
    finally:
        if bar is not None:
            bar.close()
        connection.close()


def _cmd_serve(args) -> None:
    settings = _settings(**{name: getattr(args, name) for name in SERVE_OPTIONS})
    from .service.serve import serve

    raise SystemExit(serve(settings))


def _cmd_new_key(args) -> None:
    """A random API key (32 bytes, URL-safe) and the keys-file entry that stores only its SHA-256: the key is
    printed this once, for the operator to hand over; the entry goes into FEATUREHASH_KEYS_FILE's "keys"."""
    import hashlib
    import secrets

    from .service.auth.keys import KeyEntry

    key = secrets.token_urlsafe(32)
    try:
        entry = KeyEntry(name=args.name, tenant=args.tenant, scopes=args.scope,
                         sha256=hashlib.sha256(key.encode()).hexdigest())
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
        raise UsageError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    _print_json({"key": key, "entry": entry.model_dump(mode="json", exclude={"limits"})})


def _cmd_repair_aof(args) -> None:
    from .store.embedded import EmbeddedRedisError, repair_append_only_file

    data_dir = args.data_dir if args.data_dir is not None else _settings().data_dir
    try:
        print(f"featurehash: {repair_append_only_file(data_dir)}", file=sys.stderr)
    except EmbeddedRedisError as exc:
        print(f"featurehash: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="featurehash", description="Seeded kernel feature maps.")
    parser.add_argument("--version", action="version", version=f"featurehash {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP service (embedded Redis unless REDIS_URL is set)")
    serve.add_argument("--host", help="bind address (FEATUREHASH_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (FEATUREHASH_PORT, default 8000)")
    serve.add_argument("--workers", type=int, help="uvicorn worker processes (FEATUREHASH_WORKERS, default 1)")
    serve.add_argument("--data-dir", dest="data_dir", help="embedded Redis data (FEATUREHASH_DATA_DIR, default ./data)")
    serve.set_defaults(run=_cmd_serve)

    repair = commands.add_parser("repair-aof", help="make the embedded Redis's corrupt append-only file loadable: "
                                 "copy it aside, then truncate it at its first bad command")
    repair.add_argument("--data-dir", dest="data_dir",
                        help="embedded Redis data (FEATUREHASH_DATA_DIR, default ./data)")
    repair.set_defaults(run=_cmd_repair_aof)

    warm = commands.add_parser("warm-cache", help="compile every method's kernels into numba's cache "
                               "(NUMBA_CACHE_DIR), so later processes start without compiling")
    warm.set_defaults(run=_cmd_warm_cache)

    new_key = commands.add_parser("new-key", help="make an API key: prints it once, with the keys-file entry "
                                  "(its SHA-256, tenant and scopes) to add to FEATUREHASH_KEYS_FILE")
    new_key.add_argument("--name", required=True, help="the key's name (logged, never the key)")
    new_key.add_argument("--tenant", required=True, help="the tenant it acts for ([a-z0-9][a-z0-9_-]*)")
    new_key.add_argument("--scope", required=True, action="append", choices=("read", "write", "admin"),
                         help="a scope it grants (repeat for several)")
    new_key.set_defaults(run=_cmd_new_key)

    migrate = commands.add_parser("migrate-index", help="move an LSH index into the sharded layout (its items "
                                  "spread over shards, each a Redis Cluster hash tag) while it serves; resumable")
    migrate.add_argument("name", help="the index id")
    migrate.add_argument("--redis-url", dest="redis_url", help="the Redis it lives in (default: REDIS_URL)")
    migrate.add_argument("--key-prefix", dest="key_prefix", default="featurehash:",
                         help="the service's key prefix (FEATUREHASH_KEY_PREFIX; default featurehash:)")
    migrate.add_argument("--tenant", default="default", help="the tenant that owns it (default: default)")
    migrate.add_argument("--shards", type=_shard_count, help="shards: a number (1-256) or auto (one per 8,000,000 expected items); "
                         "default 1")
    migrate.add_argument("--expected-items", dest="expected_items", type=_positive_int,
                         help="sizes the shards' hashes (default: twice the items it holds, at least 100,000)")
    migrate.add_argument("--quiet", action="store_true", help="no progress bar")
    migrate.set_defaults(run=_cmd_migrate_index)

    spec = commands.add_parser("spec", help="validate a spec and print it resolved, with its id")
    spec.add_argument("spec", help="spec JSON file")
    spec.set_defaults(run=_cmd_spec)

    for name, run, what in (("transform", _cmd_transform, "features"), ("hash", _cmd_hash, "discrete codes")):
        command = commands.add_parser(name, help=f"write the {what} of the vectors (.npy/.npz) or the text "
                                                 "(.jsonl/.txt) in a file")
        command.add_argument("--spec", required=True, help="spec JSON file")
        command.add_argument("--input", required=True, help="2-D .npy array, sparse .npz matrix, .jsonl (a "
                             "document, token list or {token: weight} per line) or .txt (a document per line)")
        command.add_argument("--output", required=True, help=".npy file to write (.npy is added when missing); "
                             ".npz for the sparse features of a hashing map")
        command.add_argument("--chunk-rows", dest="chunk_rows", type=_positive_int, default=None,
                             help="rows per chunk (default: about 32 MiB of input and output; 4096 lines of text)")
        command.add_argument("--quiet", action="store_true", help="no progress bar")
        if name == "transform":
            command.add_argument("--float64", action="store_true", help="compute features in float64")
        command.set_defaults(run=run)

    dedup = commands.add_parser("dedup", help="deduplicate a corpus of files (--output), or write every pair of "
                                "near-duplicate rows of a .npy/.npz file (--pairs)")
    dedup.add_argument("input", nargs="+", help="with --output: files, folders, globs or URLs of JSON Lines, "
                       "Parquet, CSV or text (.gz/.zst too); with --pairs: one 2-D .npy array, sparse .npz matrix, "
                       "or .jsonl / .txt documents for a spec with a text stage")
    dedup.add_argument("--spec", help="spec JSON file of a gcws, minhash or binning map (with --output: optional, default "
                       "minhash over word 3-shingles, gcws with --weighted)")
    dedup.add_argument("--threshold", type=float, help="least similarity of a pair, in (0, 1] (default 0.7 with "
                       "--output)")
    dedup.add_argument("--target-recall", dest="target_recall", type=float, default=0.95,
                       help="chance a pair at the threshold is found (default 0.95)")
    dedup.add_argument("--verify", choices=("exact", "codes"), default="exact")
    dedup.add_argument("--memory-budget", dest="memory_budget", help="e.g. 2GB: past it, band keys spill to disk")
    dedup.add_argument("--pairs", help="pairs file to write (.npz, or .parquet with pyarrow)")
    dedup.add_argument("--clusters", help="also write each row's cluster label (.npy)")
    dedup.add_argument("--mode", choices=("components", "representatives"), default="components")
    corpus = dedup.add_argument_group("corpus (with --output)")
    corpus.add_argument("--output", help="folder for the deduplicated corpus (shards in the input's format), "
                        "duplicates.parquet and summary.json")
    corpus.add_argument("--text-field", dest="text_field", default="text", help="the text's field or column")
    corpus.add_argument("--vector-field", dest="vector_field", help="instead of a text: a vector per record (a list "
                        "of numbers, {index: weight} or {indices, values}; JSON Lines or Parquet)")
    corpus.add_argument("--tokens-field", dest="tokens_field", help="instead of a text: a list of tokens or shingles "
                        "per record, compared as sets (weighted by counts with --weighted)")
    corpus.add_argument("--id-field", dest="id_field", help="the id's field (default: <file>:<line>)")
    corpus.add_argument("--input-format", dest="input_format", choices=("jsonl", "parquet", "csv", "text"),
                        help="when the names do not tell")
    corpus.add_argument("--output-format", dest="output_format", choices=("jsonl", "parquet", "csv", "text"),
                        help="the shards' format (default: the input's, every field as read)")
    corpus.add_argument("--text-unit", dest="text_unit", choices=("line", "file"), default="line",
                        help="plain text: a document per line, or per file")
    corpus.add_argument("--keep", default="first", help="first, longest, shortest, max:<field> or min:<field>")
    corpus.add_argument("--weighted", action="store_true", help="weighted Jaccard of 1 + log(count) shingle "
                        "weights (default: Jaccard of the shingle sets)")
    corpus.add_argument("--reference", action="append", help="an already clean corpus the input is checked "
                        "against (repeatable): only what is new is kept")
    corpus.add_argument("--against-index", dest="against_index", help="an LSH index in Redis the input is checked "
                        "against: only what has no near duplicate in it is kept")
    corpus.add_argument("--redis-url", dest="redis_url", help="the Redis of --against-index (default: REDIS_URL)")
    corpus.add_argument("--key-prefix", dest="key_prefix", default="featurehash:", help="the index's key prefix")
    corpus.add_argument("--add-to-index", dest="add_to_index", action="store_true",
                        help="add the kept documents to --against-index (so the next batch is checked against them)")
    corpus.add_argument("--work-dir", dest="work_dir", help="with an --output URL: the local folder the run is "
                        "staged in, resumable (default: one under the temporary folder)")
    corpus.add_argument("--on-error", dest="on_error", choices=("raise", "skip"), default="raise",
                        help="a bad record: refuse the run (naming file and line), or skip and count it")
    corpus.add_argument("--shard-rows", dest="shard_rows", type=_positive_int, default=100_000)
    corpus.add_argument("--force", action="store_true", help="overwrite an existing output")
    corpus.add_argument("--keep-work", dest="keep_work", action="store_true",
                        help="keep <output>/_work (each stage's output) after the run")
    dedup.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bars (default: on a terminal)")
    dedup.set_defaults(run=_cmd_dedup)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except UsageError as exc:
        print(f"featurehash: {exc}", file=sys.stderr)
        return BAD_INPUT
    except ValueError as exc:
        maps = sys.modules.get("featurehash.maps")  # a FeatureHashError comes from it, so it is loaded then
        if maps is None or not isinstance(exc, maps.FeatureHashError):
            raise
        print(f"featurehash: {exc}", file=sys.stderr)  # bad input: one line naming the file and the problem
        return BAD_INPUT
    except OSError as exc:  # e.g. the output cannot be written
        print(f"featurehash: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
