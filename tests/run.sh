#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the system packages the
# integration tests start for real (Prometheus, Slurm with munge, slurmdbd and
# MariaDB, Chromium, nginx), installs preemptlens with its test extras, then runs
# lint, type checks and pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(prometheus munge slurmctld slurmd slurm-client slurmdbd mariadb-server chromium chromium-driver nginx)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "tests/run.sh: missing system packages ${missing[*]}; run as root to install them" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q -e '.[test,spark]'
ruff check .
mypy
# The hostile property tests (marker `hostile`, tests/hostile/) run with the rest.
exec python3 -m pytest "$@"
