#!/usr/bin/env bash
# Installs Debian's Chromium (and the DejaVu fonts the PNG plots use) for the
# HTML report's end-to-end test, unless already there.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
if [ -x /usr/bin/chromium ] && [ -d /usr/share/fonts/truetype/dejavu ]; then
  echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo '?')"
  exit 0
fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
