#!/bin/sh
# Installs the build at $1 into a fresh prefix, builds the consumer project
# (this directory) against it with find_package(Ember), trains and exports a
# small model with the installed ember, and scores it with the consumer.
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ember-consumer-XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/build" >"$work/build.log"
ember="$work/prefix/bin/ember"
"$ember" gen-data --rows=1200 --vocabulary=200 --out="$work/data.tsv" >/dev/null 2>&1
"$ember" train --train_data="$work/data.tsv" --bottom_mlp=16 --top_mlp=16 --embedding_dim=8 \
  --threads=1 --export_dir="$work/bundle" >/dev/null 2>&1
"$work/build/consumer" "$work/bundle" "$work/data.tsv"
