#!/usr/bin/env python3
"""Registers a unit of each kernel in CubeCL compilation logs, as the GPU
machine's CUDA 13.0 gives them, on any machine (no GPU): NVRTC 13.0 makes the
PTX with CubeCL's options (sm_90a), ptxas 13.0 -v counts the registers.

    python3 benches/device/registers.py LOG [LOG ...]
    python3 benches/device/registers.py --orders [--align INDEX=BYTES ...] LOG [LOG ...]
    python3 benches/device/registers.py --loops LOG [LOG ...]

With --orders, the first kernel of each LOG is compiled once for every
order of its shared arrays (`shared_memory_INDEX`), each placed after the
one before at a multiple of its alignment (32 bytes, or as --align says),
and each order's registers printed.

With --loops, each kernel's SASS (nvdisasm, from PyPI's nvidia-cuda-nvdisasm
wheel) is searched for its loops — stretches that end in a branch back — and
each is printed with its length in instructions and its commonest opcodes: the
instructions a point or a tile costs, without a GPU.

LOG: CubeCL's full compilation log (`run.sh source` or `run.sh compiles`
keep them), or one kernel's CUDA C++ in a `.cu` file (`cargo run --example
kernel_source` writes them without a GPU). The CUDA wheels come from PyPI into $FERROFIT_CUDA_WHEELS
(default ~/.cache/ferrofit-cuda13) on first use. Above 128 registers a
256-unit cube of the tensor-core passes fits once a multiprocessor, not
twice (docs/PERFORMANCE.md, "One source, two programs").
"""
import collections, ctypes, itertools, os, re, subprocess, sys, tempfile, zipfile

ROOT = os.environ.get("FERROFIT_CUDA_WHEELS", os.path.expanduser("~/.cache/ferrofit-cuda13"))
WHEELS = ["nvidia-cuda-nvrtc==13.0.*", "nvidia-cuda-nvcc==13.0.*", "nvidia-cuda-runtime==13.0.*",
          "nvidia-cuda-crt==13.0.*"]
# 13.0 of the disassembler is not on PyPI; 13.2 reads sm_90a code of ptxas 13.0.
DISASM = "nvidia-cuda-nvdisasm==13.2.*"
CU13 = os.path.join(ROOT, "x", "nvidia", "cu13")


def install(specs, tool):
    """The wheels `specs`, downloaded from PyPI and unpacked once; the path of
    `tool`, one of their programs, made executable."""
    path = os.path.join(CU13, "bin", tool)
    if os.path.exists(path):
        return path
    os.makedirs(ROOT, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT) as d:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", d] + specs,
                       check=True)
        for w in os.listdir(d):
            zipfile.ZipFile(os.path.join(d, w)).extractall(os.path.join(ROOT, "x"))
    os.chmod(path, 0o755)
    return path


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


def loops(nvrtc, src):
    """(start, end, instructions, commonest opcodes) of each loop of `src`'s SASS."""
    nvdisasm = install([DISASM], "nvdisasm")
    with tempfile.TemporaryDirectory() as d:
        ptx, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(ptx, "wb").write(ptx_of(nvrtc, src))
        subprocess.run([os.path.join(CU13, "bin", "ptxas"), "-arch=sm_90a", "-o", cubin, ptx], check=True)
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    # Lines "/*0ac0*/  @!P0 FFMA R1, ... ;" and labels ".L_x_3:"; a branch names
    # its target by label: (address, opcode without modifiers, target label or None).
    code, labels, pending = [], {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            pending.append(label[1])
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);", line)
        if not m:
            continue
        at = int(m[1], 16)
        for name in pending:
            labels[name] = at
        pending = []
        target = re.search(r"\((\.L_x_\d+)\)", m[3]) if m[2].startswith("BRA") else None
        code.append((at, m[2].split(".")[0], target[1] if target else None))
    code = [(at, op, labels.get(t)) for at, op, t in code]
    for at, _, target in code:
        if target is not None and target <= at:
            body = [op for a, op, _ in code if target <= a <= at]
            top = collections.Counter(body).most_common(6)
            yield target, at, len(body), " ".join(f"{op} {n}" for op, n in top)


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
    by_loop = args[:1] == ["--loops"]
    args = args[1:] if by_order or by_loop else args
    while args[:1] == ["--align"]:
        i, b = args[1].split("=")
        align[int(i)] = int(b)
        args = args[2:]
    install(WHEELS, "ptxas")
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
            if by_loop:
                for start, end, n, top in loops(nvrtc, src):
                    print(f"{log}: {name}: loop {start:#06x}..{end:#06x}: {n} instructions ({top})")
                continue
            regs, spills = registers(nvrtc, src)
            print(f"{log}: {name}: {regs} registers, {spills} bytes spilled")


if __name__ == "__main__":
    main()
