#!/usr/bin/env python3
"""Validates generated JSON texts against their JSON Schemas (the structured-output suite's
oracle, python3-jsonschema, Draft 2020-12). Input: a JSON-lines file of {"schema": path,
"text": str}. Prints one line per invalid text and a last line "checked N invalid M".
Exit status 0 when every text parses and validates, 1 otherwise, 77 without jsonschema."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (scripts/bootstrap.sh installs it)")
    sys.exit(77)


def main(path):
    checked = invalid = 0
    schemas = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            item = json.loads(line)
            if item["schema"] not in schemas:
                with open(item["schema"], encoding="utf-8") as s:
                    schemas[item["schema"]] = jsonschema.Draft202012Validator(
                        json.load(s), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            checked += 1
            try:
                errors = [e.message for e in schemas[item["schema"]].iter_errors(json.loads(item["text"]))]
            except json.JSONDecodeError as e:
                errors = ["not JSON: %s" % e]
            if errors:
                invalid += 1
                print("%s: %r: %s" % (item["schema"], item["text"][:200], "; ".join(errors)[:400]))
    print("checked %d invalid %d" % (checked, invalid))
    return 0 if invalid == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
