#!/usr/bin/env bash
# Session 5, 2x H200, fourth call: the carry is zeroed in place (one fresh
# buffer a step fewer) — the third call's measurements again with that binary.
exec bash benches/device/session5x2c.sh
