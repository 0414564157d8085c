# Sourced at the start of a run on the GPU machine (see docs/PERFORMANCE.md):
# unpacks the carried Vulkan loader, points at the NVIDIA ICD and NVRTC, and
# unpacks the carried ferrofit binary to /tmp/ferrofit.
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvrtc=$(find / -name 'libnvrtc.so*' -not -path '/proc/*' 2>/dev/null | head -n1)
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}"
gunzip -c .dev/ferrofit.gz > /tmp/ferrofit && chmod +x /tmp/ferrofit
export OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
