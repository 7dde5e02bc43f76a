#!/usr/bin/env python3
"""Read pcapsleuth Parquet output back with pyarrow (a second implementation).

Usage: parquet_readback.py FINDINGS.parquet FLOWS.parquet
Prints {"findings": [[detector, severity, community_id, tcp_stream, first_frame]...],
        "flows": [[tcp_stream, community_id, state, packets]...]} as JSON.
Exit 77 when pyarrow is missing (the Rust test skips).
"""
import json
import sys

try:
    import pyarrow.parquet as pq
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

f = pq.read_table(sys.argv[1]).to_pylist()
g = pq.read_table(sys.argv[2]).to_pylist()
print(json.dumps({
    "findings": [[r["detector"], r["severity"], r["community_id"], r["tcp_stream"], r["first_frame"]] for r in f],
    "flows": [[r["tcp_stream"], r["community_id"], r["state"], r["packets"]] for r in g],
}))
