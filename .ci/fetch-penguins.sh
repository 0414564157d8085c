#!/usr/bin/env bash
# Fetches a real public data set for tests/datafiles.rs: the Palmer penguins
# CSV as the `palmerpenguins` package ships it on PyPI (text columns, `NA`
# cells), so the CSV path is tested on a file nobody wrote for these tests.
# Only the wheel is downloaded (pip, from the configured index) and the CSV
# unpacked from it; nothing is installed. Prints the CSV's path; the wheel's
# pinned sha256 is checked.
set -euo pipefail
version=0.1.6
sha256=5c3be9af84dd703a25f1aaeadeac6ac770cfd38c1620d00089f581c023129ee0
dir="${1:?usage: fetch-penguins.sh DIR}"
csv="$dir/palmerpenguins/data/penguins.csv"
if [ -f "$csv" ]; then echo "$csv"; exit 0; fi
mkdir -p "$dir"
if ! python3 -m pip --version >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dir" "palmerpenguins==$version"
wheel="$dir/palmerpenguins-$version-py3-none-any.whl"
echo "$sha256  $wheel" | sha256sum --check --quiet
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("palmerpenguins/data/penguins.csv", sys.argv[2])' "$wheel" "$dir"
echo "$csv"
