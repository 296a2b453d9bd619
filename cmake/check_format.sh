#!/usr/bin/env bash
# Checks that the library's headers are formatted with the repository's .clang-format (clang-format
# --dry-run -Werror); prints each unformatted file and exits 1 if there is any, 2 if clang-format is missing.
# Usage: cmake/check_format.sh [ROOT]   (ROOT: a checkout, default: this one; CLANG_FORMAT=... picks the binary)
set -euo pipefail

root="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)"
clang_format="${CLANG_FORMAT:-clang-format}"
command -v "$clang_format" >/dev/null || { echo "check_format.sh: $clang_format not found" >&2; exit 2; }
[[ -f "$root/.clang-format" ]] || { echo "check_format.sh: $root/.clang-format not found" >&2; exit 2; }

mapfile -t files < <(cd "$root" && find include -name '*.hpp' | LC_ALL=C sort)
[[ ${#files[@]} -gt 0 ]] || { echo "check_format.sh: no headers under $root/include" >&2; exit 2; }
bad=()
for f in "${files[@]}"; do
  (cd "$root" && "$clang_format" --style=file --dry-run -Werror "$f" >/dev/null 2>&1) || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check_format.sh: ${#bad[@]} of ${#files[@]} headers are not formatted (clang-format -i them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check_format.sh: all ${#files[@]} headers under include/ are formatted"
