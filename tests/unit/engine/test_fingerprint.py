"""The environment fingerprint: redaction of secrets, versions asked from the server's interpreter, env.json."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import stat
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from specbench_tui import __version__
from specbench_tui.engine import fingerprint
from specbench_tui.engine.fingerprint import (
    REDACTED,
    collect,
    collect_async,
    dumps,
    is_secret_name,
    redact,
    redact_env,
    relevant_env,
    scrub_text,
    server_versions,
)
from specbench_tui.engine.gpus import FakeBackend, NullBackend

HF = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
OPENAI = "sk-" + "proj-0123456789abcdefABCDEF"
PLAIN = "correct-horse-battery"


@pytest.fixture(autouse=True)
def fresh_cache():
    fingerprint._version_cache.clear()
    yield
    fingerprint._version_cache.clear()


# ------------------------------------------------------------------------------------------- redaction

@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "DB_PASSWORD", "MY_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "api_key",
                                  "WANDB_API_KEY", "GITHUB_PAT", "SENTRY_DSN", "BASIC_AUTH", "Session_Cookie",
                                  "SSH_PRIVATE", "SGLANG_API_KEY", "REDIS_PWD"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "HOME",
                                  "NCCL_DEBUG", "SGLANG_ENABLE_TORCH_COMPILE", "driver_version", "sha256"])
def test_plain_names(name):
    assert not is_secret_name(name)


def test_scrub_text_masks_token_shaped_strings_and_url_passwords():
    text = (f"login with {HF} then {OPENAI}; ghp_{'x' * 36} AKIAABCDEFGHIJKLMNOP "
            "https://user:hunter2pass@example.com/path eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4")
    out = scrub_text(text)
    for leaked in (HF, OPENAI, "ghp_xxx", "AKIAABCD", "hunter2pass", "eyJhbGciOiJI"):
        assert leaked not in out
    assert "https://user:<redacted>@example.com/path" in out and out.startswith("login with <redacted>")
    assert scrub_text("nothing secret here: 12.8, sm_120") == "nothing secret here: 12.8, sm_120"


def test_redact_env_and_secret_values_anywhere():
    env = {"HF_TOKEN": HF, "DB_PASSWORD": PLAIN, "SGLANG_ARGS": f"--password {PLAIN}", "NCCL_DEBUG": "INFO",
           "SHORT_KEY": "abc", "NOTE": "abc stays"}
    out = redact_env(env)
    assert out["HF_TOKEN"] == REDACTED and out["DB_PASSWORD"] == REDACTED and out["SHORT_KEY"] == REDACTED
    assert out["SGLANG_ARGS"] == f"--password {REDACTED}", "a secret's value is scrubbed from other variables"
    assert out["NCCL_DEBUG"] == "INFO" and out["NOTE"] == "abc stays", "short values are not scrubbed from text"


def test_redact_walks_nested_documents():
    doc = {"a": {"api_key": 1234, "list": [f"x {PLAIN} y", {"token": "t"}], "tokens_total": None},
           "ok": True, "n": 3.5}
    out = redact(doc, {PLAIN})
    assert out["a"]["api_key"] == REDACTED and out["a"]["list"][0] == f"x {REDACTED} y"
    assert out["a"]["list"][1]["token"] == REDACTED and out["a"]["tokens_total"] is None
    assert out["ok"] is True and out["n"] == 3.5


def test_relevant_env_keeps_inference_variables_only():
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": HF, "HOME": "/root", "SGLANG_X": "1", "PATH": "/bin"}
    assert relevant_env(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": REDACTED, "SGLANG_X": "1"}


# ------------------------------------------------------------------------------------------- server versions

def test_versions_come_from_a_subprocess_of_the_given_interpreter():
    versions = server_versions(sys.executable, packages=("pytest", "hypothesis", "no-such-dist-xyz"))
    assert versions["error"] is None
    assert versions["python"] == platform.python_version() and versions["interpreter"] == sys.executable
    assert versions["packages"] == {"pytest": metadata.version("pytest"),
                                    "hypothesis": metadata.version("hypothesis"), "no-such-dist-xyz": None}
    assert "sglang" not in sys.modules and "torch" not in sys.modules


def _fake_torch_site(tmp_path: Path) -> Path:
    """A site directory with sglang and torch distributions whose packages explode when imported."""
    site = tmp_path / "site"
    for dist, version, package in (("sglang", "0.5.23", "sglang"), ("torch", "2.9.1+cu128", "torch"),
                                   ("triton", "3.5.1", "triton")):
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (site / package).mkdir()
        (site / package / "__init__.py").write_text(f"raise SystemExit('{package} must never be imported')\n")
    (site / "torch" / "version.py").write_text(  # as torch 2.x writes it
        "from typing import Optional\n__version__ = '2.9.1+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n")
    return site


def test_versions_of_the_server_environment_without_importing_anything(tmp_path):
    site = _fake_torch_site(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    versions = server_versions(sys.executable, env=env)
    assert versions["error"] is None
    assert versions["packages"]["sglang"] == "0.5.23" and versions["packages"]["torch"] == "2.9.1+cu128"
    assert versions["packages"]["triton"] == "3.5.1" and versions["packages"]["flashinfer-python"] is None
    assert versions["torch_cuda"] == "12.8"


def test_a_missing_interpreter_is_recorded_not_raised(tmp_path):
    missing = str(tmp_path / "no" / "python3")
    versions = server_versions(missing)
    assert versions["error"] and "cannot run" in versions["error"] and missing in versions["error"]
    assert versions["python"] is None and set(versions["packages"].values()) == {None}
    assert "sglang" in versions["packages"]


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell scripts")
def test_failing_hanging_and_babbling_interpreters(tmp_path):
    failing = _script(tmp_path, "failing", "echo 'ImportError: libcuda.so.1' >&2\nexit 3\n")
    result = server_versions(failing)
    assert "exited with 3" in result["error"] and "libcuda" in result["error"]
    hanging = _script(tmp_path, "hanging", "sleep 5\n")
    assert "did not answer within 0.3 s" in server_versions(hanging, timeout_s=0.3)["error"]
    babbling = _script(tmp_path, "babbling", "echo 'SPECBENCH-PROBE {not json'\n")
    assert "garbage" in server_versions(babbling)["error"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell scripts")
def test_the_interpreter_is_asked_once(tmp_path):
    counter = tmp_path / "count"
    answer = json.dumps({"python": "3.12.3", "executable": "/x/python", "packages": {"sglang": "0.5.23"}})
    counting = _script(tmp_path, "counting", f"echo x >> {counter}\necho 'SPECBENCH-PROBE {answer}'\n")
    first = server_versions(counting)
    second = server_versions(counting)
    assert first == second and first["packages"]["sglang"] == "0.5.23" and first["python"] == "3.12.3"
    assert counter.read_text().count("x") == 1
    server_versions(counting, refresh=True)
    assert counter.read_text().count("x") == 2


# ------------------------------------------------------------------------------------------- the document

def test_env_json_document(tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_bytes(b'[sweep]\nname = "x"\n')
    environ = {**os.environ, "HF_TOKEN": HF, "OPENAI_API_KEY": OPENAI, "DB_PASSWORD": PLAIN,
               "SGLANG_EXTRA": f"--api-key {PLAIN}", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    doc = collect(backend=FakeBackend(), sweep_path=sweep, python=sys.executable, environ=environ,
                  extra={"concurrent": True, "note": f"token {HF}"})
    text = json.dumps(doc)
    for secret in (HF, OPENAI, PLAIN):
        assert secret not in text
    assert doc["env"]["HF_TOKEN"] == REDACTED and doc["env"]["SGLANG_EXTRA"] == f"--api-key {REDACTED}"
    assert doc["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    gpus = doc["gpus"]
    assert gpus["count"] == 8 and gpus["names"] == {"NVIDIA RTX PRO 6000 Blackwell Server Edition": 8}
    assert gpus["sm"] == ["sm_120"] and gpus["devices"][0]["compute_capability"] == "12.0"
    assert "SM120" in gpus["devices"][0]["architecture"]
    assert gpus["driver_version"] and gpus["cuda_driver_version"] == "13.0"
    assert doc["sweep"]["sha256"] == hashlib.sha256(sweep.read_bytes()).hexdigest()
    assert doc["python"]["version"] == platform.python_version() and doc["specbench_version"] == __version__
    assert doc["host"]["name"] and doc["server_python"]["python"] == platform.python_version()
    assert set(doc["server_python"]["packages"]) >= {"sglang", "torch", "triton"}
    assert doc["extra"]["concurrent"] is True
    assert doc["simulated"] is True and gpus["simulated"] is True  # the fake box's figures are invented
    assert json.loads(dumps(doc)) == doc


def test_env_json_without_gpus_or_sweep_file(tmp_path):
    doc = collect(backend=NullBackend("no NVIDIA driver found"), sweep_path=tmp_path / "gone.toml",
                  python=str(tmp_path / "nopython"), environ={})
    assert doc["gpus"]["count"] == 0 and doc["gpus"]["hint"] == "no NVIDIA driver found"
    assert doc["sweep"]["sha256"] is None and "cannot read" in doc["sweep"]["error"]
    assert doc["server_python"]["error"] and doc["env"] == {}
    assert doc["simulated"] is False


async def test_collect_async_runs_off_the_loop():
    doc = await collect_async(backend=None, python=sys.executable, environ={"PATH": os.environ.get("PATH", "")})
    assert doc["gpus"]["count"] == 0 and doc["server_python"]["error"] is None
