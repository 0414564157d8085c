#!/usr/bin/env bash
# The device-machine benchmark suite: one script, one suite per call.
#
#   bash benches/device/run.sh SUITE [ARGS...]
#
# Run from the repository root on the GPU machine, with the binary (and, for
# `tests`, the test binaries) built here and carried in .dev/ — each gzipped
# as .dev/NAME.gz, or all in one .dev/bundle.tar.xz (binaries built together
# share most of their bytes: `tar -cf - … | xz -9` packs eight in ~30 MB) — and the
# Vulkan loader in .gl/ (docs/PERFORMANCE.md, "Reproducing"). Results go to
# $OUT; copy them to docs/results/DATE-MACHINE/SUITE/ afterwards.
#
# Suites:
#   tests [NAME ...]      the per-backend test binaries (CPU, CUDA, Vulkan); exits non-zero on a failure
#                         (VALIDATE=1: CubeCL reports every out-of-range index of unchecked launches)
#   seed                  the seed job on every backend beside PyTorch and JAX
#   models [HxL ...]      deep/wide models on CUDA and Vulkan beside the peers (default 32x2 64x3 128x4;
#                         MODELS_BACKENDS, default cuda,vulkan; MODELS_PEERS, default jax,torch, empty
#                         for none; MODELS_ARGS, more bench arguments, e.g. --n 10000000)
#   sweep [N ...]         time against N on CUDA and Vulkan (default 1e4 … 1e8)
#   slope [N ...]         the seed job at 100 and 1000 steps on CUDA and Vulkan: the per-step cost
#                         without the run's fixed costs (default 1e4 1e6)
#   reruns [N]            every timed run of one process, each backend alone, no warm-up (default 1e8);
#                         a baseline build in .dev/ (ferrofit_base) runs first
#   startup               whole-process wall times of `train` (kernel cache cold, warm and off) and `devices`
#   python                the Python package's pytest suite with torch (module native.so in .dev/, wheels in .whl/)
#   scaling               one GPU against all of them (data parallelism), N = 1e6 and 1e8, and a deep model
#   doctor                `ferrofit doctor` on every device
#   baselines             the general (Burn) engine and the peers' seed job as JSON lines
#   precision [HxL ...]   the fused engine in bf16, f16 (tensor cores) and f32, N = 1e6,
#                         beside the peers in bf16 and f32; then N = 1e5 and 1e7 in bf16
#                         (default 64x3 128x4; PRECISIONS, e.g. "bf16", picks the first part's;
#                         PREC_BACKENDS the backends, default cuda, e.g. cuda,vulkan)
#   ab [JOB ...]          ferrofit_base in .dev/ (a baseline build) against the current binary,
#                         alternately, twice each (the second round in reverse order), on jobs `seed` or HxL (default seed 64x3);
#                         AB_BACKENDS (default cuda,vulkan), AB_ARGS (e.g. --precision bf16) and
#                         AB_BINS (more carried builds, run after the current one, e.g.
#                         ferrofit_epi) and AB_ENVS (settings the current binary also runs under, e.g.
#                         FERROFIT_BOUNDS_CHECKS=on or FERROFIT_TILED_BLOCKS=8x4,8x4,128)
#   profile [JOB ...]     Nsight Compute on one launch: HxL the tensor-core pass (bf16, N = 1e6),
#                         tiled@HxL the f32 tiled kernel (N = 1e6),
#                         seed@N the seed job's persistent kernel at N points (f32, its first
#                         step alone and the 99 after it in one launch): launch,
#                         occupancy, warp stalls (every reason), throughput (default 64x3 128x4), at
#                         the GPU's own clocks (ncu's default locks the base clock: durations ~20 % longer)
#   sass [HxL ...]        Nsight Compute's full set on one launch of the tensor-core pass (bf16, N = 1e6):
#                         details, the SASS source page as CSV (gzipped) and its summary by opcode and
#                         by block (benches/device/sass.py) (default 128x4)
#   source [HxL ...]      the CUDA C++ that NVRTC compiles for the tensor-core pass in bf16 (CubeCL's
#                         full compilation log, kernel cache off), one file a model (default 128x4)
#   compiles [HxL ...]    the tensor-core pass in bf16 compiled afresh in each of COMPILES processes (default 6;
#                         kernel cache off): each one's time beside its shared-memory offsets and source digest;
#                         the sources in compiles_sources.tar.gz (their registers on any machine:
#                         benches/device/registers.py) (default 64x3 128x4); COMPILES_ENVS: settings to run
#                         the same way after the default, e.g. FERROFIT_TENSOR_PLAN=64,256,held=3,tile-sums
#   plans HxL PLAN ...    the tensor-core pass in bf16 on CUDA under each shared-memory layout
#                         (FERROFIT_TENSOR_PLAN, e.g. 64 or 64,256,held=2; `auto`: the
#                         engine's choice), alternately, twice each
#   blocks HxL BLOCKS ... the f32 tiled kernel the same way under each FERROFIT_TILED_BLOCKS (e.g.
#                         2x4,4x4,1024 or 4x4,4x4,256,20) on BLOCKS_BACKENDS (default vulkan)
# Set REPS (default 5) to change the number of timed runs.
set -u
suite=${1:?usage: run.sh SUITE [ARGS...] (see the header)}
shift
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvrtc=$(find / -name 'libnvrtc.so*' -not -path '/proc/*' 2>/dev/null | head -n1)
[ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}"
[ -f .dev/bundle.tar.xz ] && [ ! -d /tmp/bundle ] && mkdir -p /tmp/bundle && tar -C /tmp/bundle -xJf .dev/bundle.tar.xz
unpack() {  # unpack NAME DEST: a carried binary, from the bundle or NAME.gz
  if [ -f "/tmp/bundle/$1" ]; then cp "/tmp/bundle/$1" "$2"; else gunzip -c ".dev/$1.gz" > "$2"; fi
  chmod +x "$2"
}
unpack ferrofit /tmp/ferrofit
export OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
B=/tmp/ferrofit
REPS=${REPS:-5}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
$B devices > "$OUT/devices.txt" 2>&1

# The tensor-core pass's kernels, and a bf16 `train` of model HxL that runs them.
TENSOR_KERNELS='regex:tensor_grad|strips_grad'
bf16_train() {  # bf16_train HxL: the train arguments (more may follow)
  echo "train --backend cuda --engine fused --precision bf16 --hidden ${1%x*} --layers ${1#*x}"
}
bf16_bench() {  # bf16_bench HxL: the bench arguments of model HxL's tensor-core pass alone
  echo "bench --reps $REPS --no-history --engine fused --backends cuda --precision bf16 --hidden ${1%x*} --layers ${1#*x}"
}
log_kernels() {  # log_kernels DIR LOG: a run from DIR writes CubeCL's full compilation log (the CUDA C++) to LOG
  mkdir -p "$1"
  printf '[compilation.logger]\nlevel = "full"\nfile = "%s"\nappend = false\n' "$2" > "$1/cubecl.toml"
}

bench() {  # bench NAME ARGS...: one bench call, its table printed, JSON and Markdown kept
  local name=$1
  shift
  timeout 300 $B bench --reps "$REPS" --no-history --export-json "$OUT/$name.json" \
    --export-markdown "$OUT/$name.md" "$@" 2>>"$OUT/stderr.txt" | grep -E '^\| (ferrofit|torch|jax)'
}

case "$suite" in
tests)
  status=0
  for t in ${*:-gradients training persistent parallel tensor}; do
    unpack "test_$t" "/tmp/test_$t"
    echo "== $t"
    # VALIDATE=1: CubeCL checks every index of the kernels launched without
    # bounds checks and prints the ones out of range (CUDA).
    dir=$PWD
    [ "${VALIDATE:-0}" = 1 ] && dir=/tmp/validate && mkdir -p $dir &&
      printf '[compilation]\ncheck_mode = "validate"\n' > $dir/cubecl.toml
    (cd $dir && FERROFIT_REQUIRE_WGPU=1 FERROFIT_REQUIRE_CUDA=1 FERROFIT_REQUIRE_TENSOR_CORES=1 timeout 400 "/tmp/test_$t" --test-threads 1 --nocapture) \
      > "$OUT/test_$t.txt" 2>&1 || status=1
    grep -E "^test |test result|panicked" "$OUT/test_$t.txt"
    grep -c "VALIDATION" "$OUT/test_$t.txt" | sed "s/^/out-of-range indices reported: /"
  done
  exit $status
  ;;
seed)
  bench seed --engine fused --peers torch,jax
  ;;
models)
  for hl in ${*:-32x2 64x3 128x4}; do
    echo "== ${hl}"
    peers=${MODELS_PEERS-jax,torch}
    # shellcheck disable=SC2086 # MODELS_ARGS is a list of arguments
    bench "models_$hl" --backends "${MODELS_BACKENDS:-cuda,vulkan}" --engine fused --hidden "${hl%x*}" \
      --layers "${hl#*x}" ${peers:+--peers "$peers"} ${MODELS_ARGS:-}
  done
  ;;
slope)
  # The per-step cost without a run's fixed costs: the seed job at 100 and
  # 1000 steps (one launch each); (t1000 - t100) / 900 is one step.
  for n in ${*:-10000 1000000}; do
    for steps in 100 1000; do
      echo "== n = $n, $steps steps"
      bench "slope_${n}_$steps" --backends cuda,vulkan --engine fused --n "$n" --steps "$steps"
    done
  done
  ;;
reruns)
  # Every timed run of one process, no warm-up, each backend alone (default
  # N = 1e8): a run after the first must take as long as the first. With a
  # baseline build in .dev/ (ferrofit_base), its runs come first.
  bins=current
  if [ -f /tmp/bundle/ferrofit_base ] || [ -f .dev/ferrofit_base.gz ]; then
    unpack ferrofit_base /tmp/ferrofit_base
    bins="base current"
  fi
  for v in $bins; do
    bin=$B
    [ "$v" = base ] && bin=/tmp/ferrofit_base
    for b in cuda vulkan; do
      timeout 300 $bin bench --warmup 0 --reps 6 --no-history --engine fused --backends "$b" \
        --n "${1:-100000000}" --export-json "$OUT/reruns_${v}_$b.json" > /dev/null 2>>"$OUT/stderr.txt"
      python3 - "$OUT/reruns_${v}_$b.json" "$v" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    runs = " ".join(f"{s * 1e3:.2f}" for s in r["samples"])
    print(sys.argv[2], r["backend"], "runs (ms):", runs, "loss", f"{r['final_loss']:.5f}")
PY
    done
  done
  ;;
sweep)
  for n in ${*:-10000 100000 1000000 10000000 100000000}; do
    echo "== n = $n"
    bench "sweep_$n" --backends cuda,vulkan --engine fused --n "$n"
  done
  ;;
startup)
  # Whole-process wall times, the kernel cache in a fresh folder: the first
  # (cold) run compiles and fills it, the warm runs read it; then warm runs
  # with the cache off (the driver's own cache still warm) show what it saves.
  export FERROFIT_CACHE_DIR=/tmp/ferrofit-cache
  rm -rf "$FERROFIT_CACHE_DIR"
  wall() {  # wall LABEL ARGS...: one whole-process run of the binary
    local label=$1 s ms
    shift
    s=$(date +%s%N)
    $B "$@" > /dev/null 2>>"$OUT/stderr.txt" || label="$label FAILED"
    ms=$((($(date +%s%N) - s) / 1000000))
    printf '%-34s %d.%03d s\n' "$label" $((ms / 1000)) $((ms % 1000))
  }
  {
    for b in cpu cuda vulkan; do
      for run in cold $(seq -f warm%g "$REPS"); do wall "train $b $run" train --backend "$b" --json; done
      for run in $(seq -f warm%g "$REPS"); do
        FERROFIT_KERNEL_CACHE=off wall "train $b cache-off $run" train --backend "$b" --json
      done
      wall "train $b 3x64 first" train --backend "$b" --hidden 64 --layers 3 --steps 1 --json
      wall "train $b 3x64 again" train --backend "$b" --hidden 64 --layers 3 --steps 1 --json
    done
    for run in $(seq "$REPS"); do wall "devices $run" devices; done
    for run in $(seq "$REPS"); do wall "train cpu n=1000 steps=1 $run" train --backend cpu --n 1000 --steps 1; done
    for run in $(seq "$REPS"); do wall "--version $run" --version; done
  } | tee "$OUT/startup.txt"
  # What a warm process spends after its command (the drivers' teardown):
  # main's own "command done" time beside the whole process's.
  for b in cuda vulkan; do
    for run in $(seq 3); do
      s=$(date +%s%N)
      at=$(RUST_LOG=ferrofit=debug $B train --backend "$b" --json 2>&1 > /dev/null |
        sed -n 's/.*command done \([0-9.]*\) s.*/\1/p')
      ms=$((($(date +%s%N) - s) / 1000000))
      printf 'train %s warm%d: command done %s s, process %d.%03d s\n' "$b" "$run" "$at" $((ms / 1000)) $((ms % 1000))
    done
  done | tee "$OUT/exit.txt"
  # Where a warm run's time goes: the record's phases and the engine's own
  # (RUST_LOG debug), then the CUDA API calls and the OS runtime (Nsight Systems).
  for b in cuda vulkan cpu; do
    RUST_LOG=ferrofit=debug $B train --backend "$b" --json 2> "$OUT/phases_$b.log" |
      python3 -c 'import json,sys; r=json.load(sys.stdin); s=r["startup"]; print("%s: devices %.3f s, engine %.3f s, first step %.3f s, training %.4f s" % (sys.argv[1], s["devices"], s["engine"], r["first_step_seconds"], r["train_seconds"]))' "$b" |
      tee -a "$OUT/phases.txt"
  done
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2> /dev/null)
  if [ -n "$nsys" ]; then
    $nsys profile -q -o "$OUT/train_cuda" --trace=cuda,osrt $B train --backend cuda --json > /dev/null 2>> "$OUT/stderr.txt"
    $nsys stats -q --report cuda_api_sum,osrt_sum --format csv "$OUT/train_cuda.nsys-rep" > "$OUT/nsys.txt" 2>&1
    rm -f "$OUT"/train_cuda.nsys-rep "$OUT"/train_cuda.sqlite
    head -40 "$OUT/nsys.txt"
  fi
  $B cache | tee "$OUT/cache.txt"
  ;;
python)
  # The Python package's suite with torch (to_torch, a CLI-saved model):
  # the module and the binary from .dev/, pytest and what it needs from the
  # wheels carried in .whl/ (the machine has no registry; it has numpy,
  # torch and safetensors).
  mkdir -p /tmp/pkg/ferrofit /tmp/pydeps
  cp python/ferrofit/*.py python/ferrofit/*.pyi /tmp/pkg/ferrofit/
  unpack native.so /tmp/pkg/ferrofit/_native.abi3.so
  python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .whl/*.whl > "$OUT/pip.txt" 2>&1
  FERROFIT_BIN=$B PYTHONPATH=/tmp/pkg:/tmp/pydeps FERROFIT_REQUIRE_WGPU=1 \
    python3 -m pytest -rs -p no:cacheprovider python/tests 2>&1 | tee "$OUT/pytest.txt"
  ;;
scaling)
  for n in 1000000 100000000; do
    echo "== n = $n"
    bench "scaling_$n" --backends cuda --devices all --engine fused --n "$n"
  done
  echo "== 3x64"
  bench scaling_64x3 --backends cuda --devices all --engine fused --hidden 64 --layers 3
  ;;
doctor)
  $B doctor --lr 0.5 2> "$OUT/doctor_stderr.txt" | tee "$OUT/doctor.txt"
  $B doctor --json > "$OUT/doctor.json" 2>/dev/null
  ;;
baselines)
  for spec in "cuda general" "vulkan general" "cpu fused" "cpu general"; do
    set -- $spec
    for _ in $(seq "$REPS"); do
      timeout 300 $B train --json --backend "$1" --engine "$2" >> "$OUT/ferrofit.jsonl" 2>>"$OUT/stderr.txt" \
        || echo "{\"failed\":\"$1 $2\"}" >> "$OUT/ferrofit.jsonl"
    done
  done
  python3 benches/peers/seed_job.py > "$OUT/peers.jsonl" 2>>"$OUT/stderr.txt"
  python3 benches/summarize.py "$OUT/ferrofit.jsonl" "$OUT/peers.jsonl" | tee "$OUT/summary.md"
  ;;
precision)
  for hl in ${*:-64x3 128x4}; do
    shape="--hidden ${hl%x*} --layers ${hl#*x}"
    for p in ${PRECISIONS:-bf16 f16 f32}; do
      echo "== $hl $p"
      peers=""
      [ "$p" != f16 ] && peers="--peers jax,torch"
      bench "precision_${hl}_$p" --backends "${PREC_BACKENDS:-cuda}" --engine fused --precision "$p" $shape $peers
    done
    for n in 100000 10000000; do
      echo "== $hl bf16 n = $n"
      bench "precision_${hl}_bf16_$n" --backends "${PREC_BACKENDS:-cuda}" --engine fused --precision bf16 --n "$n" $shape
    done
  done
  ;;
ab)
  unpack ferrofit_base /tmp/ferrofit_base
  for extra in ${AB_BINS:-}; do unpack "$extra" "/tmp/$extra"; done
  for job in ${*:-seed 64x3}; do
    args="--engine fused --backends ${AB_BACKENDS:-cuda,vulkan} ${AB_ARGS:-}"
    [ "$job" != seed ] && args="$args --hidden ${job%x*} --layers ${job#*x}"
    order="base current ${AB_BINS:-} ${AB_ENVS:-}"
    for round in 1 2; do
      # The base build, the current one, each of AB_BINS, then the current
      # one under each of AB_ENVS; the second round in the reverse order, so
      # that no build always runs in the same place (after the same one).
      [ $round = 2 ] && order=$(printf '%s\n' $order | tac | tr '\n' ' ')
      for v in $order; do
        bin=$B vars=
        case $v in
        base) bin=/tmp/ferrofit_base ;;
        current) ;;
        *=*) vars=$v ;;
        *) bin=/tmp/$v ;;
        esac
        echo "== $job round $round $v"
        env $vars timeout 200 "$bin" bench --reps "$REPS" --no-history $args 2>>"$OUT/stderr.txt" | grep -E '^\| ferrofit'
      done
    done
  done | tee "$OUT/ab.txt"
  ;;
profile)
  for job in ${*:-64x3 128x4}; do
    if [ "${job%@*}" = seed ]; then
      # seed@N: the persistent kernel's launches, f32: the first step alone,
      # then the other 99 in one launch.
      kernel='regex:fused_steps|fused_grad' skip=0 count=2
      run="train --backend cuda --engine fused --n ${job#*@} --steps 100 --log-every 100"
      # A first run probes the persistent grid (launches of the same kernel)
      # and keeps the answer in the kernel cache, so the profiled run's
      # first launches are the job's.
      $B $run > /dev/null 2>&1
    elif [ "${job%@*}" = tiled ]; then
      hl=${job#*@}
      kernel='regex:tiled_grad' skip=2 count=1
      run="train --backend cuda --engine fused --precision f32 --hidden ${hl%x*} --layers ${hl#*x} --steps 4"
    else
      kernel=$TENSOR_KERNELS skip=2 count=1
      run="$(bf16_train "$job") --steps 4"
    fi
    job=${job//@/_}
    /usr/local/cuda/bin/ncu --clock-control none --kernel-name "$kernel" --launch-skip $skip --launch-count $count \
      --section LaunchStats --section Occupancy --section WarpStateStats \
      --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section InstructionStats --print-details all \
      $B $run > "$OUT/profile_$job.txt" 2>&1
    grep -E "Registers Per|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Issued Warp|Executed Instructions|Duration|Compute \(SM\)|Memory Throughput|DRAM Throughput" "$OUT/profile_$job.txt"
  done
  ;;
sass)
  ncu=/usr/local/cuda/bin/ncu
  for job in ${*:-128x4}; do
    rep=/tmp/sass_$job
    $ncu --set full --import-source yes --kernel-name "$TENSOR_KERNELS" --launch-skip 2 \
      --launch-count 1 -f -o "$rep" $B $(bf16_train "$job") --steps 4 > "$OUT/sass_${job}_run.txt" 2>&1
    $ncu --import "$rep.ncu-rep" --page details --print-details all > "$OUT/details_$job.txt" 2>&1
    $ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$job.csv" 2>>"$OUT/stderr.txt"
    gzip -f "$OUT/sass_$job.csv"
    python3 benches/device/sass.py "$OUT/sass_$job.csv.gz" | tee "$OUT/sass_${job}_summary.txt"
  done
  ;;
source)
  for job in ${*:-128x4}; do
    dir=/tmp/source_$job
    log_kernels "$dir" "$OUT/source_$job.log"
    (cd "$dir" && FERROFIT_KERNEL_CACHE=off timeout 120 $B $(bf16_train "$job") --steps 1 --log-every 1) \
      > /dev/null 2>>"$OUT/stderr.txt"
    gzip -f "$OUT/source_$job.log"
    ls -l "$OUT/source_$job.log.gz"
  done
  ;;
compiles)
  # One folder a compile, under a root emptied first (the tarball is this call's only).
  root=/tmp/compiles
  rm -rf "$root"
  for job in ${*:-64x3 128x4}; do
    k=0
    for v in - ${COMPILES_ENVS:-}; do
      k=$((k + 1))
      for i in $(seq "${COMPILES:-6}"); do
        dir=$root/${job}_v${k}_$i
        log_kernels "$dir" "$dir/source.log"
        envs=(FERROFIT_KERNEL_CACHE=off)
        [ "$v" != - ] && envs+=("$v")
        line=$(cd "$dir" && env "${envs[@]}" timeout 200 $B $(bf16_bench "$job") 2>>"$OUT/stderr.txt" |
          grep -E '^\| ferrofit')
        # The shared arrays as index@offset, digests of the local declarations' order and the whole source.
        smem=$(grep -oE 'shared_memory_[0-9]+ = reinterpret_cast<[^>]*>\(&dynamic_shared_mem\[[0-9]+\]' "$dir/source.log" |
          sed -E 's/shared_memory_([0-9]+) .*\[([0-9]+)\]/\1@\2/' | sort -t@ -k2n | tr '\n' ' ')
        decl=$(grep -E '^(float|int|uint|bool|__nv_bfloat16|uint32) l_' "$dir/source.log" | md5sum | cut -c1-8)
        echo "$job ${v#-} #$i | smem $smem| decl $decl | source $(md5sum < "$dir/source.log" | cut -c1-8) $line"
      done
    done
  done | tee "$OUT/compiles.txt"
  # Every compile's source, for reading (and compiling) elsewhere.
  tar -C "$root" -czf "$OUT/compiles_sources.tar.gz" $(cd "$root" && ls -d */source.log)
  ;;
plans | blocks)
  hl=${1:?usage: run.sh $suite HxL CHOICE ...}
  shift
  var=FERROFIT_TENSOR_PLAN run=$(bf16_bench "$hl")
  [ "$suite" = blocks ] && var=FERROFIT_TILED_BLOCKS \
    run="bench --reps $REPS --no-history --engine fused --backends ${BLOCKS_BACKENDS:-vulkan} --hidden ${hl%x*} --layers ${hl#*x}"
  for round in 1 2; do
    for choice in "$@"; do
      echo "== $hl $choice round $round"
      if [ "$choice" = auto ]; then unset "$var"; else export "$var=$choice"; fi
      timeout 200 $B $run 2>>"$OUT/stderr.txt" | grep -E '^\| ferrofit'
    done
  done | tee "$OUT/${suite}_$hl.txt"
  unset "$var"
  ;;
*)
  echo "unknown suite '$suite' (see the header of $0)" >&2
  exit 2
  ;;
esac
