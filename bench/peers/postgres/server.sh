#!/usr/bin/env bash
# Starts or stops the scratch PostgreSQL server the BigFUN peer harness uses: Debian's
# postgresql (installed here if missing), a fresh data directory, listening on 127.0.0.1 only.
#
#   server.sh start DATA_DIR [PORT]   (initdb if DATA_DIR is empty; default port 15432)
#   server.sh stop DATA_DIR
set -euo pipefail
command="${1:?start or stop}"
# Absolute, because the server resolves the socket directory (-k) from its data directory.
data_dir="$(realpath -m "${2:?data directory}")"
port="${3:-15432}"

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
bin="$(pg_bin)"
if [ -z "$bin" ]; then
  echo "installing postgresql from Debian packages" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >&2
  bin="$(pg_bin)"
fi

# PostgreSQL refuses to run as root; as root, run it as the postgres user the package creates.
as_server_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$command" in
  start)
    mkdir -p "$data_dir"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$data_dir"; fi
    chmod 700 "$data_dir"
    if [ ! -f "$data_dir/PG_VERSION" ]; then
      as_server_user "$bin/initdb" -D "$data_dir" -U postgres --auth=trust >&2
    fi
    # Memory settings sized for a 24 GB machine running one benchmark client; durability left on.
    as_server_user "$bin/pg_ctl" -D "$data_dir" -l "$data_dir/server.log" -w -t 120 \
      -o "-p $port -k $data_dir -c listen_addresses=127.0.0.1 -c shared_buffers=2GB \
          -c effective_cache_size=8GB -c work_mem=64MB -c maintenance_work_mem=1GB \
          -c max_parallel_workers_per_gather=2 -c max_wal_size=8GB" start >&2
    echo "$("$bin/postgres" --version)"
    ;;
  stop)
    if [ -f "$data_dir/postmaster.pid" ]; then
      as_server_user "$bin/pg_ctl" -D "$data_dir" -m fast -w stop >&2
    fi
    ;;
  *)
    echo "usage: server.sh start|stop DATA_DIR [PORT]" >&2
    exit 2
    ;;
esac
