# Sourced by the bench scripts: install_missing PACKAGE... installs, with apt-get (as root or through sudo),
# those of the Debian packages named that are not installed yet, and nothing when all are.
install_missing() {
  local missing=() p
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  local sudo
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
