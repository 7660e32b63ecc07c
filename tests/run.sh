#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the system packages the
# integration tests start for real (Prometheus, Slurm with munge, slurmdbd and
# MariaDB, Chromium, nginx), installs preemptlens with its test extras, then runs
# lint, type checks and pytest. Extra arguments go to pytest (and then only the
# tests they select run, in one process).
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
if [ $# -gt 0 ]; then
    exec python3 -m pytest "$@"
fi
# Three pytest processes side by side, each test in exactly one of them (tests/test_run_split.py checks that
# the three -m expressions below split every combination of the two markers so):
# - the hostile-input property tests (marker `hostile`, tests/hostile/: 10,000 examples each) keep one core
#   busy for many minutes;
# - the tests on the real Slurm (marker `real_slurm`, set by tests/slurm/conftest.py on every test using its
#   cluster) mostly wait on real jobs; the cluster has its own directory and free ports, munge is shared;
# - the rest mostly waits on the servers and browsers it starts.
# The rest's report comes first, then the real Slurm's, then the hostile tests'; any failing fails the run.
hostile_log=$(mktemp)
slurm_log=$(mktemp)
python3 -m pytest -m hostile >"$hostile_log" 2>&1 &
hostile=$!
# --durations: the slowest tests, printed every run, so the suite's time is watched where it grows.
python3 -m pytest -m "real_slurm and not hostile" --durations=25 >"$slurm_log" 2>&1 &
slurm=$!
rest=0
python3 -m pytest -m "not hostile and not real_slurm" --durations=25 || rest=$?
slurm_status=0
wait "$slurm" || slurm_status=$?
hostile_status=0
wait "$hostile" || hostile_status=$?
echo
echo "== tests on the real Slurm (python3 -m pytest -m \"real_slurm and not hostile\")"
cat "$slurm_log"
echo
echo "== hostile-input property tests (python3 -m pytest -m hostile)"
cat "$hostile_log"
rm -f "$hostile_log" "$slurm_log"
if [ "$rest" -ne 0 ] || [ "$slurm_status" -ne 0 ] || [ "$hostile_status" -ne 0 ]; then
    exit 1
fi
