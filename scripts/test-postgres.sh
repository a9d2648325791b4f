#!/usr/bin/env bash
# Prints the URL of a PostgreSQL server the tests can use, and nothing else on
# stdout (everything else goes to stderr):
#   1. MMC_TEST_DATABASE_URL, when set;
#   2. else a server answering on 127.0.0.1:$MMC_TEST_PG_PORT (default 5432),
#      as postgres://postgres@127.0.0.1:PORT/postgres;
#   3. else a private throwaway cluster under target/pg (trust auth, 127.0.0.1
#      only, a free port), installing Debian's postgresql first if no initdb
#      is found. Run as root, the cluster belongs to and runs as `postgres`.
# Fails (non-zero, the reason on stderr) when none of these works: the
# PostgreSQL tests never skip.
#
#   export MMC_TEST_DATABASE_URL=$(scripts/test-postgres.sh)
#   scripts/test-postgres.sh --stop     # stops the private cluster, if running
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/target/pg"
data="$dir/data"
port=${MMC_TEST_PG_PORT:-5432}

say() { echo "test-postgres: $*" >&2; }
die() { say "$*"; exit 1; }

pg_bin() {
    # The newest installed server's binaries.
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [[ -n "$bin" && -x "$bin/initdb" ]] && echo "$bin"
}

# Runs a command as the cluster's owner: `postgres` when we are root
# (initdb and the server refuse to run as root).
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

answers() { # host port
    if command -v pg_isready >/dev/null; then
        pg_isready -q -h "$1" -p "$2" -t 3
    else
        psql "postgres://postgres@$1:$2/postgres" -Atqc 'SELECT 1' >/dev/null 2>&1
    fi
}

stop() {
    local bin
    bin=$(pg_bin) || exit 0
    if [[ -f "$data/postmaster.pid" ]]; then
        as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >&2 || true
    fi
}

if [[ "${1:-}" == "--stop" ]]; then
    stop
    exit 0
fi

if [[ -n "${MMC_TEST_DATABASE_URL:-}" ]]; then
    echo "$MMC_TEST_DATABASE_URL"
    exit 0
fi

if answers 127.0.0.1 "$port"; then
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    exit 0
fi
say "no server on 127.0.0.1:$port; starting a private cluster under $dir"

# Our own cluster from an earlier run, still running?
if [[ -f "$dir/port" ]] && answers 127.0.0.1 "$(cat "$dir/port")"; then
    echo "postgres://postgres@127.0.0.1:$(cat "$dir/port")/postgres"
    exit 0
fi

bin=$(pg_bin) || {
    [[ $(id -u) -eq 0 ]] || die "no PostgreSQL installed (no initdb under /usr/lib/postgresql/*/bin) and not root to install it: apt-get install postgresql, or set MMC_TEST_DATABASE_URL"
    say "installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2 || die "apt-get update failed"
    apt-get install -y postgresql >&2 || die "apt-get install postgresql failed"
    # The package starts its own cluster on 5432 where it can; that is fine,
    # but we use ours, so the result does not depend on it.
    bin=$(pg_bin) || die "postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
}

if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "no postgres user to run the cluster as (is postgresql installed?)"
fi

mkdir -p "$dir"
if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$dir"
    # The owner must reach target/pg through every parent directory: add
    # the traverse bit (only that) where it is missing.
    p="$dir"
    while [[ "$p" != / ]]; do
        p=$(dirname "$p")
        if ! runuser -u postgres -- test -x "$p"; then
            say "letting postgres traverse $p (chmod o+x)"
            chmod o+x "$p"
        fi
    done
fi

if [[ ! -f "$data/PG_VERSION" ]]; then
    rm -rf "$data"
    as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >&2 \
        || die "initdb failed"
fi

# A free port: ask the kernel for one.
free=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) \
    || free=$((20000 + RANDOM % 20000))

# Socket directory inside the cluster's own dir: /var/run/postgresql may not exist.
as_owner "$bin/pg_ctl" -D "$data" -l "$dir/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$free -c unix_socket_directories=$dir" \
    start >&2 || { tail -n 20 "$dir/log" >&2 || true; die "the private cluster did not start (log: $dir/log)"; }
echo "$free" > "$dir/port"

answers 127.0.0.1 "$free" || die "the private cluster started but does not answer on 127.0.0.1:$free"
say "private cluster up on 127.0.0.1:$free (stop: $0 --stop)"
echo "postgres://postgres@127.0.0.1:$free/postgres"
