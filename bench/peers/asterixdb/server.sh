#!/usr/bin/env bash
# Installs, starts or stops AsterixDB 0.9.8 — the system BigFUN and the result-distribution
# thesis studied — as its own sample cluster (a cluster controller and two node controllers)
# on 127.0.0.1, with the query service at http://127.0.0.1:19002/query/service.
#
#   server.sh start INSTALL_DIR   (fetches the binary assembly from Maven Central if missing;
#                                  waits until the cluster is ACTIVE; prints the version; a
#                                  cluster already answering is left as it is)
#   server.sh stop INSTALL_DIR
#
# The sample cluster keeps its data under INSTALL_DIR/apache-asterixdb-0.9.8/opt/local/data.
set -euo pipefail
command="${1:?start or stop}"
install_dir="${2:?install directory}"
version=0.9.8
home="$install_dir/apache-asterixdb-$version"
service=http://127.0.0.1:19002/query/service

install() {
  if [ -x "$home/opt/local/bin/start-sample-cluster.sh" ]; then return; fi
  command -v java >/dev/null || { echo "AsterixDB needs Java (17 works): install openjdk-17-jre-headless" >&2; exit 1; }
  command -v mvn >/dev/null || { echo "fetching AsterixDB needs Maven (mvn)" >&2; exit 1; }
  echo "fetching AsterixDB $version from Maven Central" >&2
  mvn -q dependency:get \
    -Dartifact="org.apache.asterix:asterix-server:$version:zip:binary-assembly" -Dtransitive=false >&2
  local zip="$HOME/.m2/repository/org/apache/asterix/asterix-server/$version/asterix-server-$version-binary-assembly.zip"
  mkdir -p "$install_dir"
  unzip -q -o "$zip" -d "$install_dir"
  [ -x "$home/opt/local/bin/start-sample-cluster.sh" ] || { echo "unexpected layout in $zip" >&2; exit 1; }
}

answers() {
  curl -sf --max-time 5 "$service" --data-urlencode 'statement=SELECT VALUE 1;' >/dev/null
}

case "$command" in
  start)
    install
    if answers; then
      echo "AsterixDB $version (sample cluster already running on 127.0.0.1)"
      exit 0
    fi
    # The sample cluster's own script starts the processes and waits for ACTIVE.
    (cd "$home/opt/local/bin" && ./start-sample-cluster.sh) >&2
    for _ in $(seq 1 60); do
      if answers; then
        echo "AsterixDB $version (sample cluster: 1 CC + 2 NCs, 127.0.0.1)"
        exit 0
      fi
      sleep 2
    done
    echo "AsterixDB did not answer on $service" >&2
    exit 1
    ;;
  stop)
    if [ -x "$home/opt/local/bin/stop-sample-cluster.sh" ]; then
      (cd "$home/opt/local/bin" && ./stop-sample-cluster.sh) >&2 || true
    fi
    ;;
  *)
    echo "usage: server.sh start|stop INSTALL_DIR" >&2
    exit 2
    ;;
esac
