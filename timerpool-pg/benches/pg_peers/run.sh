#!/usr/bin/env bash
# Runs the side-by-side comparison (arguments go to the program), with
# sqlxmq's migrations from the
# registry copy that cargo fetched.
set -euo pipefail
cd "$(dirname "$0")"
cargo fetch -q
src=$(cargo metadata --format-version 1 | python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="sqlxmq"))')
export SQLXMQ_MIGRATIONS="$(dirname "$src")/migrations"
cargo run --release -- "$@"
