#!/usr/bin/env bash
# Starts PgBouncer (Debian's package) in transaction pooling mode on 127.0.0.1:$1 in front of the
# PostgreSQL at 127.0.0.1:5432, every database name passed through, in a temp dir; prints the dir
# (stop it with: kill "$(cat DIR/pgbouncer.pid)"). A stock configuration otherwise: nothing
# added for the service (no ignore_startup_parameters).
set -euo pipefail
port="${1:-16432}"
if ! command -v pgbouncer >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
fi
dir="$(mktemp -d /tmp/pgbouncer-XXXXXX)"
cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 20
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
INI
echo '"postgres" ""' >"$dir/userlist.txt"
chown -R postgres "$dir"
runuser -u postgres -- pgbouncer -d "$dir/pgbouncer.ini"
for _ in $(seq 1 50); do
  pg_isready -h 127.0.0.1 -p "$port" -q && break
  sleep 0.1
done
echo "$dir"
