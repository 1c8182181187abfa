#!/usr/bin/env python3
"""SchemaStore coverage of structured output (issue 39, "Done when"): not reachable from CI.

usage: scripts/schemastore.py SCHEMAS_DIR [--dsv4 PATH] [--every 3] [--max-kb 200] [--show-errors]

SCHEMAS_DIR is a fetched copy of SchemaStore's src/schemas/json/ (github SchemaStore/schemastore).
Takes every 3rd *.json file under 200 KB sorted by name, compiles each with `dsv4 check-schema`
(no model) strict and with --best-effort (strict: false), and prints a Markdown table: the
compile rates, the strict rate over the schemas that use none of the keywords the engine never
enforces (not, if, contains, unevaluated*, dependentSchemas, $dynamicRef, a remote $ref;
searched from the root through local $refs), refusals by the keyword they name, and what
strict: false relaxed.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

UNENFORCEABLE = {"not", "if", "contains", "unevaluatedProperties", "unevaluatedItems", "dependentSchemas",
                 "$dynamicRef"}
# Keywords whose value is a schema / a map of schemas / a list of schemas.
SCHEMA_KEYS = {"not", "if", "then", "else", "contains", "additionalProperties", "additionalItems", "propertyNames",
               "unevaluatedProperties", "unevaluatedItems", "contentSchema"}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}


def anchor(root, name):
    """The schema declaring the plain-name fragment `name` ($anchor, or $id/id "#name"), else None."""
    pending = [root]
    while pending:
        s = pending.pop()
        if isinstance(s, dict):
            if s.get("$anchor") == name or s.get("$id") == "#" + name or s.get("id") == "#" + name:
                return s
            pending.extend(s.values())
        elif isinstance(s, list):
            pending.extend(s)
    return None


def resolve(root, ref):
    """The value a local $ref names (None when it names nothing or another document): resolved
    against the root's $id by RFC 3986, as the engine does (grammar/schema_ref.h)."""
    from urllib.parse import unquote, urljoin
    ident = (root.get("$id") or root.get("id")) if isinstance(root, dict) else None
    if not ref.startswith("#") and isinstance(ident, str) and ident.split("#")[0]:
        base = ident.split("#")[0]
        resolved = urljoin(base, ref)
        if resolved.split("#")[0] != base:
            return None
        ref = "#" + resolved.split("#", 1)[1] if "#" in resolved else "#"
    if not ref.startswith("#"):
        return None
    if len(ref) > 1 and ref[1] != "/":
        return anchor(root, unquote(ref[1:]))
    at = root
    for token in unquote(ref[1:]).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(at, dict) and token in at:
            at = at[token]
        elif isinstance(at, list) and token.isdigit() and int(token) < len(at):
            at = at[int(token)]
        else:
            return None
    return at


def unenforceable_used(root):
    """The never-enforced keywords reachable from the root (through local $refs)."""
    found, seen, pending = set(), set(), [root]
    while pending:
        s = pending.pop()
        if not isinstance(s, dict) or id(s) in seen:
            continue
        seen.add(id(s))
        for k, v in s.items():
            if k in UNENFORCEABLE or (k == "if" and isinstance(v, (dict, bool))):
                found.add(k)
            if k == "dependencies" and isinstance(v, dict) and any(isinstance(d, (dict, bool)) for d in v.values()):
                found.add("dependentSchemas")  # draft-04..07's schema form of dependencies
            if k in ("$ref", "$recursiveRef") and isinstance(v, str):
                target = resolve(root, v)
                if target is None and not v.startswith("#"):
                    found.add("remote $ref")
                elif target is not None:
                    pending.append(target)
            elif k in SCHEMA_KEYS or k == "items":
                pending.extend(v if isinstance(v, list) else [v])
            elif k in SCHEMA_MAPS and isinstance(v, dict):
                pending.extend(v.values())
            elif k in SCHEMA_LISTS and isinstance(v, list):
                pending.extend(v)
    return found


def first_keyword(error):
    """The keyword (or limit) a refusal names first."""
    m = re.search(r"keyword '([^']+)'", error)
    if m:
        return f"`{m.group(1)}`"
    for pattern, label in [(r"unsatisfiable", "unsatisfiable"),
                           (r"branches, at most|schemas, at most|ways at once|expands more than|counting the readings",
                            "too many branches / readings"),
                           (r"may match the same value", "`oneOf` overlap"),
                           (r"\$ref", "`$ref`"), (r"properties, at most|more than \d+ properties", "too many properties"),
                           (r"enum has", "too many enum values"),
                           (r"nest", "depth"), (r"not JSON|out of a double", "not JSON"), (r"merg", "merge")]:
        if re.search(pattern, error):
            return label
    return "other: " + error[:60]


def check(dsv4, files, best_effort):
    cmd = [dsv4, "check-schema"] + (["--best-effort"] if best_effort else [])
    lines = {}
    for i in range(0, len(files), 50):
        out = subprocess.run(cmd + files[i:i + 50], capture_output=True, text=True, errors="replace")
        for line in out.stdout.splitlines():
            row = json.loads(line)
            lines[row["file"]] = row
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("schemas_dir")
    ap.add_argument("--dsv4", default=os.path.join(os.path.dirname(__file__), "..", "build", "release", "apps", "cli",
                                                    "dsv4"))
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--max-kb", type=int, default=200)
    ap.add_argument("--show-errors", action="store_true")
    a = ap.parse_args()
    names = sorted(n for n in os.listdir(a.schemas_dir) if n.endswith(".json"))
    names = [n for n in names if os.path.getsize(os.path.join(a.schemas_dir, n)) < a.max_kb * 1024]
    files = [os.path.join(a.schemas_dir, n) for n in names[::a.every]]
    strict, loose = check(a.dsv4, files, False), check(a.dsv4, files, True)

    enforceable = []
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (ValueError, UnicodeDecodeError):
            continue
        if not unenforceable_used(doc):
            enforceable.append(f)

    def rate(rows, subset):
        ok = sum(1 for f in subset if rows.get(f, {}).get("ok"))
        return f"{ok} / {len(subset)} ({100.0 * ok / max(1, len(subset)):.1f} %)"

    print(f"SchemaStore {a.schemas_dir}: every {a.every}rd file under {a.max_kb} KB sorted by name: {len(files)} files\n")
    print("| | compiled |\n|---|---:|")
    print(f"| strict: true, all | {rate(strict, files)} |")
    print(f"| strict: true, none of not/if/contains/unevaluated*/dependentSchemas/$dynamicRef/remote $ref | "
          f"{rate(strict, enforceable)} |")
    print(f"| strict: false, all | {rate(loose, files)} |\n")
    for title, rows in (("strict: true", strict), ("strict: false", loose)):
        counts = collections.Counter(first_keyword(r["error"] or "") for r in rows.values() if not r["ok"])
        print(f"Refusals ({title}) by the keyword named first:\n\n| keyword | count |\n|---|---:|")
        for k, n in counts.most_common():
            print(f"| {k} | {n} |")
        print()
    # "format \"x\" (unknown: an annotation)" counts under one row (x named in the response).
    relaxed = collections.Counter(re.sub(r'^format ".*" \(unknown', 'format "..." (unknown', r.split(": ", 1)[-1])
                                  for row in loose.values() for r in row.get("relaxed", []))
    print("Relaxed by strict: false (keyword occurrences):\n\n| keyword | count |\n|---|---:|")
    for k, n in relaxed.most_common():
        print(f"| `{k}` | {n} |")
    if a.show_errors:
        for f in files:
            r = strict.get(f)
            if r and not r["ok"]:
                print(f"{os.path.basename(f)}: {r['error']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
