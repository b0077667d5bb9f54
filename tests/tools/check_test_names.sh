#!/bin/bash
# Every Catch2 test case of a binary whose cases become ctest tests one by one (catch_discover_tests) must have a name
# ctest can pass back as a filter: a ';' splits it into two filters that match nothing (--warn NoTests then fails
# both halves; CI failed so once). Usage: check_test_names.sh REPO_ROOT
set -euo pipefail
cd "$1"
bad=$(grep -rnE 'TEST_CASE\("[^"]*;' tests/unit tests/e2e tests/mpi tests/cuda 2>/dev/null || true)
if [ -n "$bad" ]; then
  echo "test names: these contain ';' (ctest runs each case by its name as a filter, a ';' splits it: use a comma):"
  echo "$bad"
  exit 1
fi
echo "test names: no ';' in the test cases ctest runs one by one"
