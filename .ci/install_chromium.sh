#!/usr/bin/env bash
# Installs the browser the dashboard tests drive (tests/integration/dashboard): Debian's
# `chromium` package (Playwright's own browser downloads are not used), unless a chromium
# is already at $TANDEM_CHROMIUM or /usr/bin/chromium; and Playwright's Python package,
# unless importable. Idempotent. Needs root (or sudo) for apt-get.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
CHROMIUM="${TANDEM_CHROMIUM:-/usr/bin/chromium}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_chromium.sh: not root and no sudo; run it as root" >&2; exit 1
  fi
fi

if [ -x "$CHROMIUM" ]; then
  echo "chromium already installed: $CHROMIUM"
else
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium.sh: chromium is missing and there is no apt-get;" \
         "install chromium with your package manager and set TANDEM_CHROMIUM to its path" >&2
    exit 1
  fi
  echo "Installing chromium (apt-get install chromium)..."
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
  [ -x "$CHROMIUM" ] || { echo "install_chromium.sh: chromium installed but $CHROMIUM is missing; set TANDEM_CHROMIUM" >&2; exit 1; }
fi

if ! "$PYTHON" -c "import playwright.sync_api" >/dev/null 2>&1; then
  echo "Installing playwright (Python)..."
  "$PYTHON" -m pip install -q "playwright>=1.40"
fi

"$CHROMIUM" --version
