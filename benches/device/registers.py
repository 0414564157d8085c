#!/usr/bin/env python3
"""Registers a unit of each kernel in CubeCL compilation logs, as the GPU
machine's CUDA 13.0 gives them, on any machine (no GPU): NVRTC 13.0 makes the
PTX with CubeCL's options (sm_90a), ptxas 13.0 -v counts the registers.

    python3 benches/device/registers.py LOG [LOG ...]
    python3 benches/device/registers.py --orders [--align INDEX=BYTES ...] LOG [LOG ...]

With --orders, the first kernel of each LOG is compiled once for every
order of its shared arrays (`shared_memory_INDEX`), each placed after the
one before at a multiple of its alignment (32 bytes, or as --align says),
and each order's registers printed.

LOG: CubeCL's full compilation log (`run.sh source` or `run.sh compiles`
keep them), or one kernel's CUDA C++ in a `.cu` file (`cargo run --example
kernel_source` writes them without a GPU). The CUDA wheels come from PyPI into $FERROFIT_CUDA_WHEELS
(default ~/.cache/ferrofit-cuda13) on first use. Above 128 registers a
256-unit cube of the tensor-core passes fits once a multiprocessor, not
twice (docs/PERFORMANCE.md, "One source, two programs").
"""
import ctypes, itertools, os, re, subprocess, sys, tempfile, zipfile

ROOT = os.environ.get("FERROFIT_CUDA_WHEELS", os.path.expanduser("~/.cache/ferrofit-cuda13"))
WHEELS = ["nvidia-cuda-nvrtc==13.0.*", "nvidia-cuda-nvcc==13.0.*", "nvidia-cuda-runtime==13.0.*",
          "nvidia-cuda-crt==13.0.*"]
CU13 = os.path.join(ROOT, "x", "nvidia", "cu13")


def fetch():
    """The four wheels, unpacked once."""
    if os.path.exists(os.path.join(CU13, "bin", "ptxas")):
        return
    os.makedirs(ROOT, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", ROOT] + WHEELS,
                   check=True)
    for w in os.listdir(ROOT):
        if w.endswith(".whl"):
            zipfile.ZipFile(os.path.join(ROOT, w)).extractall(os.path.join(ROOT, "x"))
    os.chmod(os.path.join(CU13, "bin", "ptxas"), 0o755)


def kernels(log):
    """(name, source) of each kernel in a CubeCL compilation log, or of the
    one kernel in a `.cu` file (`cargo run --example kernel_source`)."""
    text = open(log).read()
    if log.endswith(".cu"):
        yield os.path.basename(log), text
        return
    for part in text.split("[START_KERNEL_COMPILATION]")[1:]:
        name = re.search(r"^name: ([^<\n]+)", part, re.M)
        src = part.split("```cpp\n", 1)[1].split("\n```", 1)[0]
        yield (name.group(1).split("::")[-1] if name else "?"), src


def ptx_of(nvrtc, src):
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), None, 0, None, None) == 0
    opts = [b"--gpu-architecture=sm_90a", b"-lineinfo"] + [
        f"--include-path={os.path.join(CU13, 'include')}".encode()]
    if nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.value.decode()[:2000])
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetPTX(prog, buf)
    return buf.value


# An array's size in bytes, its index, and its offset between `head` and `tail`.
SHARED = re.compile(r"(?P<head>// Shared array size: \d+, (?P<bytes>\d+) bytes\n[^\n]*shared_memory_"
                    r"(?P<index>\d+) = reinterpret_cast<[^>]*>\(&dynamic_shared_mem\[)\d+(?P<tail>\])")


def registers(nvrtc, src):
    """(registers, bytes spilled) of the kernel in `src`."""
    with tempfile.NamedTemporaryFile(suffix=".ptx") as ptx:
        ptx.write(ptx_of(nvrtc, src))
        ptx.flush()
        out = subprocess.run([os.path.join(CU13, "bin", "ptxas"), "-arch=sm_90a", "-v", "-o",
                              os.devnull, ptx.name], capture_output=True, text=True).stderr
    regs = re.findall(r"Used (\d+) registers", out)
    spills = re.findall(r"(\d+) bytes spill stores", out)
    return (regs[0] if regs else "?"), (spills[0] if spills else "?")


def orders(nvrtc, src, align):
    """Every order of `src`'s shared arrays, with its registers."""
    sizes = {int(m["index"]): int(m["bytes"]) for m in SHARED.finditer(src)}
    for order in itertools.permutations(sorted(sizes)):
        at, offsets = 0, {}
        for i in order:
            a = align.get(i, 32)
            at = -(-at // a) * a
            offsets[i], at = at, at + sizes[i]
        placed = SHARED.sub(lambda m: f"{m['head']}{offsets[int(m['index'])]}{m['tail']}", src)
        yield " ".join(f"{i}@{offsets[i]}" for i in order), registers(nvrtc, placed)[0]


def main():
    args, align = sys.argv[1:], {}
    by_order = args[:1] == ["--orders"]
    args = args[1:] if by_order else args
    while args[:1] == ["--align"]:
        i, b = args[1].split("=")
        align[int(i)] = int(b)
        args = args[2:]
    fetch()
    lib = os.path.join(CU13, "lib")
    ctypes.CDLL(os.path.join(lib, "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
    nvrtc = ctypes.CDLL(os.path.join(lib, "libnvrtc.so.13"))
    for log in args:
        if by_order:
            name, src = next(kernels(log))
            for order, regs in orders(nvrtc, src, align):
                print(f"{log}: {name}: {order}: {regs} registers", flush=True)
            continue
        for name, src in kernels(log):
            regs, spills = registers(nvrtc, src)
            print(f"{log}: {name}: {regs} registers, {spills} bytes spilled")


if __name__ == "__main__":
    main()
