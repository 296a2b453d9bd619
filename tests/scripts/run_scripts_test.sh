#!/usr/bin/env bash
# The run scripts' argument handling, without installing or building anything (--dry-run): a compiler
# that does not exist stops with "compiler not found" before any package is named, a compiler that
# exists is used as given (no package named after it), and examples/run.sh takes tests/run.sh's flags.
set -uo pipefail
src_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for script in tests/run.sh examples/run.sh; do
  for cxx in /nonexistent/g++-99 g++-99 clang++-99; do
    out="$("$src_dir/$script" --dry-run --cxx "$cxx" 2>&1)"; rc=$?
    [[ $rc -ne 0 ]] || fail "$script --cxx $cxx: exit 0"
    [[ "$out" == *"compiler not found"* ]] || fail "$script --cxx $cxx: no 'compiler not found' in: $out"
    [[ "$out" != *install* || "$out" == *"to have it installed"* ]] || fail "$script --cxx $cxx: $out"
  done
  # An existing compiler under a name no package has (a symlink g++-13 to g++) is used, not installed.
  tmp="$(mktemp -d)"
  ln -s "$(command -v g++)" "$tmp/g++-13"
  out="$("$src_dir/$script" --dry-run --cxx "$tmp/g++-13" --build-type Debug --jobs 1 2>&1)"; rc=$?
  [[ $rc -eq 0 ]] || fail "$script --cxx $tmp/g++-13: exit $rc: $out"
  [[ "$out" == *"compiler: $tmp/g++-13"* && "$out" == *"build type: Debug"* ]] || fail "$script symlink: $out"
  ! grep "would install:" <<<"$out" | grep -q "g++-13" || fail "$script would install g++-13: $out"
  rm -rf "$tmp"
  out="$("$src_dir/$script" --dry-run --bogus 2>&1)"; rc=$?
  [[ $rc -ne 0 && "$out" == *"unknown argument"* ]] || fail "$script --bogus: exit $rc: $out"
done
if command -v clang++ >/dev/null; then
  out="$("$src_dir/examples/run.sh" --dry-run --cxx clang++ --sanitize address,undefined 2>&1)" \
    || fail "examples/run.sh --cxx clang++: $out"
  [[ "$out" == *"compiler: $(command -v clang++)"* && "$out" == *"sanitize: address,undefined"* ]] \
    || fail "examples/run.sh --cxx clang++ ignored: $out"
fi
[[ $failures -eq 0 ]] && echo "run scripts: all checks passed"
exit $((failures > 0))
