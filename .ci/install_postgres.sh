#!/usr/bin/env bash
# Installs what the PostgreSQL tests need (tests/conftest_postgres.py):
#   * the PostgreSQL server binaries (initdb, pg_ctl, postgres) from Debian's `postgresql`
#     package, unless they are already there (on PATH, in $TANDEM_PG_BIN or
#     /usr/lib/postgresql/<ver>/bin);
#   * an unprivileged OS user to run the server as when the tests run as root
#     ($TANDEM_PG_USER, default `postgres`; the Debian package creates it);
#   * the Python driver psycopg 3 (`psycopg[binary]`), unless importable.
# The script only installs; the test fixture starts and stops its own throwaway server.
# Idempotent. Needs root (or sudo) for apt-get.
set -euo pipefail

PG_USER="${TANDEM_PG_USER:-postgres}"
PYTHON="${PYTHON:-python3}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_postgres.sh: not root and no sudo; run it as root" >&2; exit 1
  fi
fi

find_pg_bin() {
  if [ -n "${TANDEM_PG_BIN:-}" ] && [ -x "$TANDEM_PG_BIN/initdb" ] && [ -x "$TANDEM_PG_BIN/pg_ctl" ]; then
    echo "$TANDEM_PG_BIN"; return 0
  fi
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  return 1
}

if PG_BIN="$(find_pg_bin)"; then
  echo "PostgreSQL already installed: $PG_BIN"
else
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_postgres.sh: PostgreSQL is missing and there is no apt-get;" \
         "install the PostgreSQL server with your package manager and set TANDEM_PG_BIN" >&2
    exit 1
  fi
  echo "Installing PostgreSQL (apt-get install postgresql)..."
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq postgresql >/dev/null
  PG_BIN="$(find_pg_bin)" || { echo "install_postgres.sh: postgresql installed but initdb/pg_ctl not found" >&2; exit 1; }
  echo "PostgreSQL installed: $PG_BIN"
fi

# The Debian package may start a cluster of its own; the tests do not use it.
if [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; then
  if ! id "$PG_USER" >/dev/null 2>&1; then
    echo "Creating the unprivileged OS user $PG_USER to run test servers as"
    $SUDO useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$PG_USER"
  fi
fi

if ! "$PYTHON" -c "import psycopg" >/dev/null 2>&1; then
  echo "Installing psycopg 3..."
  "$PYTHON" -m pip install -q "psycopg[binary]>=3.1"
fi

"$PG_BIN/pg_ctl" --version
"$PYTHON" -c "import psycopg; print('psycopg', psycopg.__version__)"
