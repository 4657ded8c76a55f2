#!/usr/bin/env bash
# StarPU built with CUDA, for the StarPU engine's CUDA codelets (docs/distributed.md). Debian's
# libstarpu-dev has no CUDA, and the GPU machines fetch nothing, so StarPU's source travels:
#
#   bash bench/cuda/starpu_cuda.sh stage STARPU_GIT_DIR [TAG]   # here: .starpu/starpu.tar.gz
#   bash bench/cuda/starpu_cuda.sh build PREFIX                 # on the GPU machine
#
# stage: TAG (default starpu-1.3.11: the series Debian ships, 1.3.10, so the engine's pkg-config
# name starpu-1.3 holds, with 1.3.10's CUDA 12 fix: cublas.h and cublas_v2.h no longer included
# together) of a git checkout of StarPU (https://gitlab.inria.fr/starpu/starpu, mirrored
# at github.com/starpu-runtime/starpu), with its configure generated here (autoreconf: the GPU
# machine has no autotools), packed into .starpu/ (ignored by git, about 10 MB; a device run
# carries it: carry [".starpu"]).
# build: configure (CUDA on; no MPI, OpenCL, Fortran, hwloc, docs, examples or tests; no
# --disable-sc-hypervisor either, which StarPU 1.3 reads as enable) and install
# into PREFIX with every core. StarPU needs cuBLAS and cuSPARSE with CUDA (its headers include
# cusparse.h): the toolkit's, else those of the nvidia-cublas / nvidia-cusparse wheels beside
# PyTorch. The stage patches the two CUDA 13 removals StarPU still uses (see below).
set -euo pipefail
cd "$(dirname "$0")/../.."
verb=${1:-}

case "$verb" in
stage)
  git_dir=$2 tag=${3:-starpu-1.3.11}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git -C "$git_dir" archive "$tag" | tar -x -C "$work"
  # CUDA 13 removed cudaThreadExit (the old name of cudaDeviceReset) and cudaDeviceProp's
  # computeMode (now an attribute query), which StarPU 1.3 and 1.4 still use
  sed -i 's/cudaThreadExit();/cudaDeviceReset();/' "$work/src/core/perfmodel/perfmodel_bus.c"
  sed -i 's/props\[devid\]\.computeMode == cudaComputeModeExclusive/starpu_cuda_compute_mode(devid) == cudaComputeModeExclusive/' \
    "$work/src/drivers/cuda/driver_cuda.c"
  grep -q "starpu_cuda_compute_mode(devid)" "$work/src/drivers/cuda/driver_cuda.c" ||
    { echo "$tag: the computeMode test is not where this script patches it"; exit 1; }
  sed -i '0,/^#include <starpu_cuda.h>/s//#include <starpu_cuda.h>\nstatic int starpu_cuda_compute_mode(int devid) { int mode = 0; cudaDeviceGetAttribute(\&mode, cudaDevAttrComputeMode, devid); return mode; }/' \
    "$work/src/drivers/cuda/driver_cuda.c"
  grep -q "^static int starpu_cuda_compute_mode" "$work/src/drivers/cuda/driver_cuda.c" ||
    { echo "$tag: no '#include <starpu_cuda.h>' line in driver_cuda.c to patch after"; exit 1; }
  (cd "$work" && autoreconf -if -I m4 >"$work/autoreconf.out" 2>&1) ||
    { tail -n 20 "$work/autoreconf.out"; exit 1; }
  [ -x "$work/configure" ] || { echo "autoreconf made no configure"; exit 1; }
  mkdir -p .starpu
  tar czf .starpu/starpu.tar.gz -C "$work" .
  echo "$tag" >.starpu/VERSION
  ls -l .starpu
  ;;
build)
  prefix=$2
  [ -f .starpu/starpu.tar.gz ] || { echo "no .starpu/starpu.tar.gz: stage it first ($0 stage ...)"; exit 2; }
  src=$(mktemp -d)
  tar xzf .starpu/starpu.tar.gz -C "$src"
  cuda=${CUDA_HOME:-/usr/local/cuda}
  [ -x "$cuda/bin/nvcc" ] || cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  cppflags="" ldflags=""
  for lib in cublas cusparse; do
    [ -e "$cuda/lib64/lib$lib.so" ] && continue
    # a wheel's folder holds lib/lib$lib.so.N and include/: nvidia/$lib/ up to CUDA 12,
    # nvidia/cu13/ (shared by the CUDA 13 wheels) after; -l$lib needs the unversioned name
    so=$(python3 -c "
import glob, os, sys
import nvidia
for d in nvidia.__path__:
    for so in sorted(glob.glob(os.path.join(d, '*', 'lib', 'lib$lib.so.*'))):
        print(so); sys.exit(0)
sys.exit(1)" 2>/dev/null) || {
      echo "no lib$lib.so in $cuda/lib64 and no nvidia wheel with it: StarPU cannot use CUDA"; exit 2; }
    w=$(dirname "$(dirname "$so")")
    mkdir -p "$src/libs"
    ln -sf "$so" "$src/libs/lib$lib.so"
    echo "$lib: $so"
    cppflags+=" -I$w/include" ldflags+=" -L$src/libs -Wl,-rpath,$w/lib"
  done
  ldflags+=" -Wl,-rpath,$cuda/lib64"
  echo "StarPU $(cat .starpu/VERSION 2>/dev/null) with CUDA at $cuda into $prefix"
  (cd "$src" && ./configure --prefix="$prefix" --enable-cuda --with-cuda-dir="$cuda" \
     CPPFLAGS="$cppflags" LDFLAGS="$ldflags" \
     --disable-opencl --disable-mpi --disable-fortran --disable-build-doc --disable-build-examples \
     --disable-build-tests --disable-socl --disable-starpufft --disable-starpurm \
     --disable-mlr --disable-fxt --disable-openmp --without-hwloc \
     >"$src/configure.out" 2>&1 || { tail -n 30 "$src/configure.out"; exit 1; }
   grep -q "^#define STARPU_USE_CUDA 1" include/starpu_config.h ||
     { echo "configured without CUDA:"; grep -i cuda "$src/configure.out" | tail -n 20; exit 1; }
   make -j"$(nproc)" >"$src/make.out" 2>&1 ||
     { grep -v -i "deprecated\|^ *[0-9]* | \|^ *| " "$src/make.out" | grep -B 4 -A 4 -E "error|Error [0-9]" | head -n 60
       exit 1; }
   make install >"$src/install.out" 2>&1 || { tail -n 20 "$src/install.out"; exit 1; })
  # StarPU's headers include cublas_v2.h and cusparse.h: where those came from a wheel, its
  # pkg-config flags must name the wheel's include folder too
  [ -z "$cppflags" ] || sed -i "s#^Cflags: .*#&$cppflags#" "$prefix"/lib/pkgconfig/starpu-1.3.pc
  ls "$prefix/lib/pkgconfig"
  grep "^Cflags" "$prefix"/lib/pkgconfig/starpu-1.3.pc
  ;;
*)
  echo "usage: $0 stage STARPU_GIT_DIR [TAG] | build PREFIX"; exit 2 ;;
esac
