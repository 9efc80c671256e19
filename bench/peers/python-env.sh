#!/usr/bin/env bash
# Creates (or updates) the Python virtualenv the peer harness and the differential tests use,
# under $HOME/.cache so repeated runs reuse it, and prints its python path.
#
#   python-env.sh           the peers every run needs (requirements.txt)
#   python-env.sh spark     also PySpark (requirements-spark.txt: ~500 MB, so only on demand)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CAIRN_VENV:-$HOME/.cache/cairn-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
for extra in "$@"; do
    case "$extra" in
        spark) "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements-spark.txt" >&2 ;;
        *) echo "python-env.sh: unknown extra \`$extra\` (known: spark)" >&2; exit 2 ;;
    esac
done
echo "$venv/bin/python"
