"""Classes over 150 lines and files over 300 lines under the given roots (default app): python .ci/longest.py [roots]."""
import ast, pathlib, sys
roots = sys.argv[1:] or ["app"]
for root in roots:
    for p in sorted(pathlib.Path(root).rglob("*.py")):
        text = p.read_text()
        n = text.count("\n")
        if n > 300:
            print(f"FILE  {n:5d}  {p}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                ln = node.end_lineno - node.lineno + 1
                if ln > 150:
                    print(f"CLASS {ln:5d}  {p}:{node.lineno} {node.name}")
