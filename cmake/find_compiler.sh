# Sourced by tests/run.sh and examples/run.sh: their shared flags, which compiler to use, and which
# Debian 12 package to install for it. A package is named only for the compilers listed here; any other compiler must exist
# already: no package name is ever guessed from what was typed (apt reads an unknown name as a pattern).

# Prints the Debian 12 package that provides the compiler command NAME, or nothing when NAME is not known.
compiler_package() {
  case "$1" in
    g++) echo g++ ;;
    g++-12) echo g++-12 ;;
    clang++) echo clang ;;
    clang++-14) echo clang-14 ;;
  esac
}

# Prints the sanitizer runtime packages a known clang NAME needs ("recommended" only by clang), or nothing.
sanitizer_packages() {
  case "$1" in
    clang++) echo libclang-rt-dev llvm ;;
    clang++-14) echo libclang-rt-14-dev llvm-14 ;;
  esac
}

# find_compiler SCRIPT CXX: sets cxx_path when CXX exists (a name on PATH or a path), else cxx_package to
# the package that provides it (a known bare name only); otherwise exits with "compiler not found".
find_compiler() {
  cxx_path="$(command -v "$2" 2>/dev/null || true)"
  cxx_package=""
  [[ -n "$cxx_path" ]] && return 0
  [[ "$2" == */* ]] || cxx_package="$(compiler_package "$2")"
  if [[ -z "$cxx_package" ]]; then
    echo "$1: compiler not found: '$2' (give an installed compiler, or one of g++, g++-12, clang++," \
         "clang++-14 to have it installed)" >&2
    exit 2
  fi
}

# install_missing SCRIPT DRY_RUN PACKAGE...: installs the packages that are not installed (apt-get, as
# root or through sudo); with DRY_RUN=1 only prints them.
install_missing() {
  local script="$1" dry_run="$2"
  shift 2
  if ! command -v dpkg >/dev/null || ! command -v apt-get >/dev/null; then
    echo "$script: not a Debian system; make sure these are installed: $*" >&2
    return 0
  fi
  local missing=() p
  # dpkg-query's one status line, compared whole: `dpkg -s | grep -q` under pipefail failed at random
  # (grep exits at its match, dpkg dies of SIGPIPE on a long description, the pipeline says 141).
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$p")
  done
  if [[ "$dry_run" == 1 ]]; then
    echo "$script: would install: ${missing[*]:-nothing}"
    return 0
  fi
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo=()
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "$script: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
    sudo=(sudo)
  fi
  echo "$script: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# parse_run_flags SCRIPT_PATH "$@": the flags both run scripts take (see their --help). Reads the defaults from
# cxx, sanitize, build_type, bench and jobs as the caller set them; sets them, dry_run, extra_args (what
# follows `--`) and san_flags. Exits 2 with a message naming the script on a bad flag.
parse_run_flags() {
  local path="$1" script
  script="$(basename "$(dirname "$1")")/$(basename "$1")"  # tests/run.sh, for messages
  shift
  dry_run=0
  extra_args=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --cxx) cxx="${2:?--cxx needs a compiler}"; shift 2 ;;
      --sanitize) sanitize="${2:?--sanitize needs a mode}"; shift 2 ;;
      --build-type) build_type="${2:?--build-type needs a type}"; shift 2 ;;
      --bench) bench=ON; shift ;;
      --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
      --dry-run) dry_run=1; shift ;;
      --) shift; extra_args=("$@"); break ;;
      -h|--help) sed -n '2,/^set -euo/p' "$path" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "$script: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  case "$bench" in ON|on|1|true|yes) bench=ON ;; *) bench=OFF ;; esac
  if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "$script: --jobs must be a positive number, got '$jobs'" >&2
    exit 2
  fi
  san_flags=""
  case "$sanitize" in
    ""|none) sanitize=none ;;
    thread) san_flags="-fsanitize=thread -g" ;;
    *)
      local parts p
      IFS=',' read -r -a parts <<<"$sanitize"
      for p in "${parts[@]}"; do
        case "$p" in
          address|undefined|leak) ;;
          *) echo "$script: unknown sanitizer '$p' in '$sanitize'" >&2; exit 2 ;;
        esac
      done
      san_flags="-fsanitize=$sanitize -fno-sanitize-recover=all -fno-omit-frame-pointer -g" ;;
  esac
}
