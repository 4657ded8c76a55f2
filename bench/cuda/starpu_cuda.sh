#!/usr/bin/env bash
# StarPU built with CUDA, for the StarPU engine's CUDA codelets (docs/distributed.md). Debian's
# libstarpu-dev has no CUDA, and the GPU machines fetch nothing, so StarPU's source travels:
#
#   bash bench/cuda/starpu_cuda.sh stage STARPU_GIT_DIR [TAG]   # here: .starpu/starpu.tar.gz
#   bash bench/cuda/starpu_cuda.sh build PREFIX                 # on the GPU machine
#
# stage: TAG (default starpu-1.3.10, the version Debian ships, so the engine's pkg-config name
# starpu-1.3 holds) of a git checkout of StarPU (https://gitlab.inria.fr/starpu/starpu, mirrored
# at github.com/starpu-runtime/starpu), with its configure generated here (autoreconf: the GPU
# machine has no autotools), packed into .starpu/ (ignored by git, about 10 MB; a device run
# carries it: carry [".starpu"]).
# build: configure (CUDA on; no MPI, OpenCL, Fortran, hwloc, docs, examples or tests) and install
# into PREFIX with every core. StarPU 1.3 needs cuBLAS and cuSPARSE with CUDA: the toolkit's,
# else those of the nvidia-cublas / nvidia-cusparse wheels beside PyTorch.
set -euo pipefail
cd "$(dirname "$0")/../.."
verb=${1:-}

case "$verb" in
stage)
  git_dir=$2 tag=${3:-starpu-1.3.10}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git -C "$git_dir" archive "$tag" | tar -x -C "$work"
  (cd "$work" && autoreconf -if -I m4 >/dev/null 2>&1)
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
    # the wheel's folder: lib/lib$lib.so.N and include/; -l$lib needs the unversioned name
    w=$(python3 -c "import nvidia.$lib as m; print(list(m.__path__)[0])" 2>/dev/null) || {
      echo "no lib$lib.so in $cuda/lib64 and no nvidia-$lib wheel: StarPU cannot use CUDA"; exit 2; }
    mkdir -p "$src/libs"
    ln -sf "$(ls "$w"/lib/lib$lib.so.* | head -n 1)" "$src/libs/lib$lib.so"
    cppflags+=" -I$w/include" ldflags+=" -L$src/libs -Wl,-rpath,$w/lib"
  done
  echo "StarPU $(cat .starpu/VERSION 2>/dev/null) with CUDA at $cuda into $prefix"
  (cd "$src" && ./configure --prefix="$prefix" --enable-cuda --with-cuda-dir="$cuda" \
     CPPFLAGS="$cppflags" LDFLAGS="$ldflags" \
     --disable-opencl --disable-mpi --disable-fortran --disable-build-doc --disable-build-examples \
     --disable-build-tests --disable-socl --disable-starpufft --disable-starpurm \
     --disable-sc-hypervisor --disable-mlr --disable-fxt --disable-openmp --without-hwloc \
     >"$src/configure.out" 2>&1 || { tail -n 30 "$src/configure.out"; exit 1; }
   grep -q "^#define STARPU_USE_CUDA 1" include/starpu_config.h ||
     { echo "configured without CUDA:"; grep -i cuda "$src/configure.out" | tail -n 20; exit 1; }
   make -j"$(nproc)" >"$src/make.out" 2>&1 || { tail -n 40 "$src/make.out"; exit 1; }
   make install >"$src/install.out" 2>&1 || { tail -n 20 "$src/install.out"; exit 1; })
  ls "$prefix/lib/pkgconfig"
  ;;
*)
  echo "usage: $0 stage STARPU_GIT_DIR [TAG] | build PREFIX"; exit 2 ;;
esac
