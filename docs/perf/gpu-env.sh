# Sourced by the docs/perf scripts that run on the lent GPU machine (never elsewhere: it unpacks
# the Vulkan/GL loaders of .gl/*.deb over /, as the device tool documents for that bare VM —
# under a folder with LD_LIBRARY_PATH the loader found no driver). Sets WGPU_BACKEND, OUT and
# B (.devbin-gpu), prints the GPU, and points Vulkan at NVIDIA's ICD when wgpu sees no NVIDIA
# adapter by itself.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export WGPU_BACKEND=vulkan PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=$(mktemp -d)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=.devbin-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# Only the wgpu line: the cuda line names the GPU too.
if ! $B/rayo info 2>/dev/null | grep "^wgpu" | grep -q "NVIDIA"; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
