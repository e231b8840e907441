"""MkDocs hooks: the pages made from the repository at build time, offline.

- `reference/http.md`: the service's operations, from the app factory's own OpenAPI document (no server, no
  Redis, no network: `create_app().openapi()` only builds the document);
- `benchmarks.md`: the plots and result tables of `bench/results/`, copied into the site as they are.
"""

from __future__ import annotations

import json
import pathlib
import sys

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
SITE_RESULTS = "benchmarks/results"


def on_files(files, config):
    for path in sorted(RESULTS.iterdir()):
        if path.suffix in (".png", ".txt"):
            files.append(File.generated(config, f"{SITE_RESULTS}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "reference/http.md":
        return markdown.replace("<!-- OPENAPI -->", http_reference(openapi_document()))
    if page.file.src_uri == "benchmarks.md":
        return markdown.replace("<!-- BENCH-INDEX -->", bench_index())
    return markdown


# ----- benchmarks ------------------------------------------------------------------------------------------

def bench_index() -> str:
    lines = ["## Plots", ""]
    for png in sorted(RESULTS.glob("*.png")):
        title = png.stem.replace("_", " ")
        lines += [f"### {title}", "", f"![{title}]({SITE_RESULTS}/{png.name})", "",
                  f"Data: [`bench/results/{png.stem}.txt`]({SITE_RESULTS}/{png.stem}.txt)", ""]
    lines += ["## Result files", "",
              "Each file is the output of one bench run, written by its script's `--write` (conditions in its "
              "first lines).", ""]
    for txt in sorted(RESULTS.glob("*.txt")):
        first = txt.read_text().splitlines()[0].strip() if txt.stat().st_size else ""
        lines.append(f"- [`{txt.name}`]({SITE_RESULTS}/{txt.name}): {_cell(first[:160])}")
    return "\n".join(lines) + "\n"


# ----- HTTP reference --------------------------------------------------------------------------------------

def openapi_document() -> dict:
    app_root = str(ROOT / "app")
    if app_root not in sys.path:
        sys.path.insert(0, app_root)
    from featurehash.service.app import create_app

    return create_app().openapi()


METHODS = ("get", "post", "put", "patch", "delete")


def http_reference(doc: dict) -> str:
    out = [f"OpenAPI {doc['openapi']}, `{doc['info']['title']}` {doc['info']['version']}.", ""]
    out += ["| operation | summary |", "|---|---|"]
    operations = [(path, method, op) for path, item in doc["paths"].items()
                  for method, op in item.items() if method in METHODS]
    for path, method, op in operations:
        out.append(f"| [`{method.upper()} {path}`](#{_op_anchor(op, method, path)}) | {_cell(op.get('summary', ''))} |")
    out.append("")
    for path, method, op in operations:
        out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out += _schema_section(name, schema)
    return "\n".join(out) + "\n"


def _op_anchor(op: dict, method: str, path: str) -> str:
    raw = op.get("operationId") or f"{method}-{path}"
    return "op-" + "".join(c if c.isalnum() else "-" for c in raw.lower()).strip("-")


def _operation(path: str, method: str, op: dict) -> list[str]:
    out = [f"## `{method.upper()} {path}` {{#{_op_anchor(op, method, path)}}}", ""]
    if op.get("summary"):
        out += [f"**{op['summary']}**", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            out.append(f"| `{p['name']}` | {p.get('in', '')} | {_type(p.get('schema', {}))} | "
                       f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        out += ["**Request body**" + (" (required)" if body.get("required") else ""), ""]
        for ctype, media in body.get("content", {}).items():
            out.append(f"- `{ctype}`: {_type(media.get('schema', {}))}")
        out.append("")
        for ctype, media in body.get("content", {}).items():
            out += _examples(ctype, media)
    out += ["**Responses**", "", "| status | description | body |", "|---|---|---|"]
    for status, resp in sorted(op.get("responses", {}).items()):
        bodies = ", ".join(f"`{ctype}` {_type(media.get('schema', {}))}"
                           for ctype, media in resp.get("content", {}).items())
        out.append(f"| {status} | {_cell(resp.get('description', ''))} | {bodies} |")
    out.append("")
    return out


def _examples(ctype: str, media: dict) -> list[str]:
    examples = {}
    if "example" in media:
        examples["example"] = media["example"]
    for name, example in (media.get("examples") or {}).items():
        if isinstance(example, dict) and "value" in example:
            examples[example.get("summary") or name] = example["value"]
    out = []
    for name, value in examples.items():
        if not isinstance(value, (dict, list)):
            continue
        out += [f"Example ({_cell(name)}, `{ctype}`):", "", "```json", _json(value), "```", ""]
    return out


def _json(value) -> str:
    """A body as it is sent: one line per top-level field."""
    if isinstance(value, dict) and value:
        return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()) + "\n}"
    return json.dumps(value)


def _schema_section(name: str, schema: dict) -> list[str]:
    out = [f"### {name} {{#schema-{name.lower()}}}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties")
    if props:
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in props.items():
            out.append(f"| `{field}` | {_type(sub)} | {'yes' if field in required else 'no'} | "
                       f"{_cell(sub.get('description', ''))} |")
        out.append("")
    elif "enum" in schema:
        out += ["One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    else:
        out += [f"Type: {_type(schema)}.", ""]
    return out


def _type(schema: dict) -> str:
    if not schema:
        return "any"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if fmt else str(kind)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
