#!/usr/bin/env bash
# Creates (or updates) the Python virtualenv the peer harness and the differential tests use,
# under $HOME/.cache so repeated runs reuse it, and prints its python path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CAIRN_VENV:-$HOME/.cache/cairn-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
echo "$venv/bin/python"
