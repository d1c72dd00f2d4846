#!/usr/bin/env bash
# Prints the module's packages for `go test`, the longest-running first. go test runs the
# packages it is given in that order, -p at a time, so starting the long ones first keeps
# the last minutes from being spent on one package while the other cores idle. The list is
# from a make test on 2 cores (seconds per package in its output); a package missing from it
# still runs, after them.
set -euo pipefail
cd "$(dirname "$0")/.."
# test/e2e is not among them: make test runs it alone, after these.
slow=(
	pkg/gitopscluster   # ~400 to 780 s
	pkg/ledger          # ~180 s
	test/fault          # ~140 s
	pkg/pullmodel       # ~140 s
	test/chart          # ~100 s
	pkg/pullmodel/clusters
	test/certmanager
	test/fleet
	test/node           # ~120 s, real nodes
)
module=$(go list -m)
exclude=()
for p in "${slow[@]}"; do
	echo "./$p/"
	exclude+=(-e "$module/$p")
done
go list ./... | grep -v -x -F "${exclude[@]}" -e "$module/test/e2e" | sed "s#^$module#.#"
