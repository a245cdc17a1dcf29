#!/usr/bin/env bash
# Sets everything up on a fresh Debian machine and runs the main job: trains
# DLRM on click data Ember generates from a planted model, then prints its
# test AUC beside the planted model's ceiling. Extra arguments go to
# `ember train` (e.g. --train_data=day_0.tsv.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
EMBER_BUILD_TARGET=ember scripts/build.sh
exec "${EMBER_BUILD_DIR:-build}/tools/ember" train "$@"
