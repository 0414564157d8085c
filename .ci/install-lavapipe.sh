#!/usr/bin/env bash
# Installs lavapipe (Mesa's software Vulkan device) so the wgpu backend can be
# tested on a machine without a GPU. Burn 0.21's WGSL kernels need Mesa >= 25,
# which Debian bookworm has in bookworm-backports: this reuses the Debian mirror
# already configured on the machine (no host name is written here).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

if ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 && \
   dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -qE '^(2[5-9]|[3-9][0-9])\.'; then
  echo "lavapipe already installed: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
  exit 0
fi

. /etc/os-release
if [ "${VERSION_CODENAME:-}" = "bookworm" ]; then
  mirror=$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
           | grep -oE '[a-z]+://[^ ]+' | head -n1 || true)
  if [ -z "$mirror" ]; then
    echo "no Debian mirror found in the apt sources; add bookworm-backports by hand" >&2
    exit 1
  fi
  echo "deb $mirror bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/ferrofit-backports.list >/dev/null
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
else
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
fi
echo "installed mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
