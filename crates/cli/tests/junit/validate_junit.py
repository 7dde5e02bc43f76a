#!/usr/bin/env python3
"""Validate JUnit XML files against Jenkins' junit-10.xsd (xmlschema) and read
them with junitparser, the consumer many CI plugins use.

Usage: validate_junit.py FILE.xml...   Prints one JSON line per file:
{"file", "tests", "failures", "errors", "cases": [{"name", "failures": [type...], "errors": n}]}.
Exit 77 when xmlschema or junitparser is missing (the Rust test skips), 1 on an invalid file.
"""
import json
import os
import sys

try:
    import junitparser
    import xmlschema
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

schema = xmlschema.XMLSchema(os.path.join(os.path.dirname(os.path.abspath(__file__)), "junit-10.xsd"))
for path in sys.argv[1:]:
    schema.validate(path)  # raises on any violation
    xml = junitparser.JUnitXml.fromfile(path)
    cases = []
    tests = failures = errors = 0
    for suite in xml:
        tests += suite.tests
        failures += suite.failures
        errors += suite.errors
        for case in suite:
            kinds = [r for r in case.result]
            cases.append({
                "name": case.name,
                "failures": [r.type for r in kinds if isinstance(r, junitparser.Failure)],
                "errors": sum(isinstance(r, junitparser.Error) for r in kinds),
            })
    print(json.dumps({"file": path, "tests": tests, "failures": failures, "errors": errors, "cases": cases}))
