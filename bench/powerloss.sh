#!/usr/bin/env bash
# Power cuts under load, many of them: Atoll and Redis 7.2.6 on forgetfs
# (tests/python/forgetfs.py), POWERLOSS_TRIALS cuts (default 20) per fsync policy and server.
# The CI runs the same test with 2 cuts each; results go to docs/BENCHMARKS.md by hand.
# Needs: a debug build (cargo build), libfuse2, fusepy (tests/python/requirements.txt), and the
# Redis 7.2.6 oracle ($REDIS_SERVER, or scripts/oracle.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export POWERLOSS_TRIALS=${POWERLOSS_TRIALS:-20}
export POWERLOSS_SEED=${POWERLOSS_SEED:-$RANDOM}
echo "==> $POWERLOSS_TRIALS cuts per policy and server, seed $POWERLOSS_SEED"
python3 -m pytest -q -s tests/python/test_power_loss.py 2>&1 | grep -E "cuts|passed|failed|Error"
