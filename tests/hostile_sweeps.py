"""Hostile sweep files, generated: each one tries to take the machine, freeze validation, smuggle a secret in,
or make two configurations share a log file. Every one must be refused with exit 2 at a named line.

:func:`write_corpus` writes them into a folder and returns ``(path, line, substring)`` per file: one reported
issue must name ``path:line`` and contain ``substring``. Large ones are built here rather than checked in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

HEAD = '[sweep]\nname = "hostile"\n'
CONFIG = '\n[[configs]]\nname = "ar"\n'
WORKLOAD = '\n[[workloads]]\nkind = "code"\n'
BASE = HEAD + CONFIG + WORKLOAD


def line_of(text: str, needle: str) -> int:
    """The 1-based line where ``needle`` first appears."""
    index = text.index(needle)
    return text.count("\n", 0, index) + 1


Case = tuple[str, int, str]
"""(text, expected line, substring of the message)."""


def _at(text: str, needle: str, substring: str, shift: int = 0) -> Case:
    return text, line_of(text, needle) + shift, substring


def _past(text: str, limit: int, substring: str) -> Case:
    """Expected at the line holding byte ``limit``."""
    return text, text.encode()[:limit].count(b"\n") + 1, substring


def _exclude_rules(count: int, last: str, b_values: int = 100) -> str:
    """A 100 × ``b_values`` matrix with ``count`` exclude rules; ``last`` is appended to the file."""
    lines = [HEAD, "\n[[configs]]\nname = \"c-{a}-{b}\"\nenv = { X_A = \"{a}\", X_B = \"{b}\" }\n",
             "matrix = { a = ", json.dumps(list(range(100))), ", b = ", json.dumps(list(range(b_values))), " }\n"]
    for i in range(count):
        lines.append(f"[[configs.exclude]]\na = {i % 100}\nb = {(i // 100) % b_values}\nreason = \"r{i}\"\n")
    lines.append(last)
    lines.append(WORKLOAD)
    return "".join(lines)


def _cases(folder: Path) -> dict[str, Callable[[], Case]]:
    prompts = folder / "prompts"
    prompts.mkdir(exist_ok=True)
    (prompts / "malformed.jsonl").write_text('{"prompt": "one"}\n{"prompt": "two"\n{"prompt": "three"}\n')
    (prompts / "empty.jsonl").write_text("# nothing here\n\n")
    (prompts / "deep.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (prompts / "a_directory.jsonl").mkdir(exist_ok=True)
    fifo = prompts / "fifo.jsonl"
    if not fifo.exists():
        os.mkfifo(fifo)
    (prompts / "ok.jsonl").write_text('{"prompt": "one", "category": "math"}\n')

    def prompts_file(name: str, extra: str = "") -> Case:
        text = BASE + f'\n[[workloads]]\nname = "pf"\nkind = "prompts_file"\npath = "prompts/{name}"\n{extra}'
        return _at(text, f'path = "prompts/{name}"', "prompts file")

    def workload(body: str, needle: str, substring: str) -> Case:
        text = HEAD + CONFIG + "\n[[workloads]]\n" + body
        return _at(text, needle, substring)

    def env(table: str, line: str, substring: str = "looks like a secret") -> Case:
        text = BASE + f"\n[{table}]\n{line}\n" if table == "server.env" else (
            HEAD + CONFIG + f"[configs.env]\n{line}\n" + WORKLOAD)
        return _at(text, line, substring)

    deep_dotted = "\n".join(".".join(f"k{j}" for j in range(1, i + 2)) + " = 1" for i in range(1, 300))
    return {
        # ---------------------------------------------------------------------------- depth and size
        "arrays_nested_1000_deep": lambda: _at(BASE + "\n[server.args]\nx = " + "[" * 1000 + "]" * 1000 + "\n",
                                               "x = [", "nest deeper"),
        "arrays_nested_200k_deep": lambda: _at(BASE + "\n[server.args]\nx = " + "[" * 200_000 + "]" * 200_000,
                                               "x = [", "nest deeper"),
        "inline_tables_nested_1000_deep": lambda: _at(BASE + "\n[server.args]\nx = " + "{a = " * 1000 + "1"
                                                      + "}" * 1000 + "\n", "x = {", "nest deeper"),
        "dotted_key_100k_parts_header": lambda: _at(BASE + "\n[" + ".".join(["k"] * 100_000) + "]\nv = 1\n",
                                                    "[k.k", "nest deeper"),
        "dotted_key_100k_parts_assignment": lambda: _at(BASE + "\n[server]\n" + ".".join(["k"] * 100_000)
                                                        + " = 1\n", "k.k", "nest deeper"),
        "nested_dotted_keys_growing": lambda: _at(BASE + "\n[server]\n" + deep_dotted + "\n",
                                                  ".".join(f"k{j}" for j in range(1, 33)) + " =", "nest deeper"),
        "file_of_2_mb": lambda: _past(BASE + ("# padding " + "x" * 90 + "\n") * 21_000, 1 << 20, "larger than"),
        "file_of_10_mb": lambda: _past(BASE + ("# padding " + "x" * 90 + "\n") * 105_000, 1 << 20, "larger than"),
        # ---------------------------------------------------------------------------- what scales a run
        "gpus_a_hundred_million": lambda: _at(BASE.replace('name = "hostile"\n', 'name = "hostile"\ngpus = 100000000\n'),
                                              "gpus =", "MAX_GPUS"),
        "gpus_twenty_thousand": lambda: _at(BASE.replace('name = "hostile"\n', 'name = "hostile"\ngpus = 20000\n'),
                                            "gpus =", "MAX_GPUS"),
        "gpu_index_one_thousand": lambda: _at(BASE.replace('name = "hostile"\n', 'name = "hostile"\ngpus = [0, 1000]\n'),
                                              "gpus =", "MAX_GPUS"),
        "sweep_repeats_a_billion": lambda: _at(BASE.replace('name = "hostile"\n', 'name = "hostile"\nrepeats = 1000000000\n'),
                                               "repeats =", "MAX_REPEATS"),
        "sweep_warmup_a_million": lambda: _at(BASE.replace('name = "hostile"\n', 'name = "hostile"\nwarmup = 1000000\n'),
                                              "warmup =", "MAX_WARMUP"),
        "workload_repeats_a_billion": lambda: workload('kind = "code"\nrepeats = 1000000000\n', "repeats =",
                                                       "MAX_REPEATS"),
        "arithmetic_count_a_billion": lambda: workload('kind = "arithmetic"\ncount = 1000000000\n', "count =",
                                                       "MAX_ITEMS"),
        "code_items_twenty_thousand": lambda: workload('kind = "code"\nitems = ' + json.dumps(["trie"] * 20_000)
                                                       + "\n", "items =", "MAX_ITEMS"),
        "prompt_tokens_a_trillion": lambda: workload('kind = "long_context"\nprompt_tokens = [1000000000000]\n',
                                                     "prompt_tokens =", "MAX_PROMPT_TOKENS"),
        "max_new_tokens_a_trillion": lambda: workload('kind = "code"\nmax_new_tokens = 1000000000000\n',
                                                      "max_new_tokens =", "MAX_NEW_TOKENS"),
        "agentic_turns_a_million": lambda: workload('kind = "agentic"\nturns = 1000000\n', "turns =", "MAX_TURNS"),
        "requests_per_configuration": lambda: workload('kind = "haiku"\ncount = 10000\nrepeats = 1000\n',
                                                       "[[workloads]]", "MAX_REQUESTS"),
        # ---------------------------------------------------------------------------- the load axis
        "concurrency_a_million": lambda: workload('kind = "code"\nconcurrency = [1, 1000000]\n', "concurrency =",
                                                  "MAX_CONCURRENCY"),
        "concurrency_two_hundred_points": lambda: workload('kind = "code"\nconcurrency = '
                                                           + json.dumps(list(range(1, 201))) + "\n", "concurrency =",
                                                           "MAX_LOAD_POINTS"),
        "request_rate_1e12": lambda: workload('kind = "code"\nrequest_rate = [1e12]\n', "request_rate =",
                                              "MAX_REQUEST_RATE"),
        "load_requests_a_billion": lambda: workload('kind = "code"\nconcurrency = [1]\nrequests = 1000000000\n',
                                                    "requests =", "MAX_REQUESTS"),
        "load_waves_a_million": lambda: workload('kind = "code"\nconcurrency = [1]\nwaves = 1000000\n', "waves =",
                                                 "MAX_WAVES"),
        "load_points_times_repeats": lambda: workload('kind = "code"\nconcurrency = [4096, 4095, 4094]\n'
                                                      'repeats = 100\n', "[[workloads]]", "MAX_REQUESTS"),
        "slo_ttft_1e300": lambda: workload('kind = "code"\nconcurrency = [1]\nslo = { ttft_ms = 1e300 }\n',
                                           "slo =", "MAX_TIMEOUT_S"),
        "two_hundred_workloads": lambda: _at(HEAD + CONFIG + "".join(f'\n[[workloads]]\nname = "w{i}"\nkind = "code"\n'
                                                                     for i in range(200)), 'name = "w100"', "MAX_WORKLOADS", -1),
        "timeout_1e300": lambda: _at(BASE + "\n[engine]\nstartup_timeout_s = 1e300\n", "startup_timeout_s", "MAX_TIMEOUT_S"),
        "matrix_axis_twenty_thousand": lambda: _at(HEAD + '\n[[configs]]\nname = "c{a}"\nmatrix = { a = '
                                                   + json.dumps(list(range(20_000))) + " }\n" + WORKLOAD,
                                                   "matrix =", "MAX_CONFIGURATIONS"),
        "matrix_product_a_million": lambda: _at(HEAD + '\n[[configs]]\nname = "c{a}-{b}-{c}"\nmatrix = { a = '
                                                + json.dumps(list(range(100))) + ", b = " + json.dumps(list(range(100)))
                                                + ", c = " + json.dumps(list(range(100))) + " }\n" + WORKLOAD,
                                                "matrix =", "configurations"),
        "blocks_add_up_past_the_limit": lambda: _at(HEAD + "".join(
            f'\n[[configs]]\nname = "b{i}-{{a}}"\nmatrix = {{ a = {json.dumps(list(range(4000)))} }}\n'
            for i in range(3)) + WORKLOAD, 'name = "b2-', "MAX_CONFIGURATIONS", -1),
        "exclude_rules_over_the_limit": lambda: _at(_exclude_rules(10_001, ""), 'reason = "r10000"',
                                                    "MAX_EXCLUDE_RULES", -3),
        "exclude_rules_ten_thousand_then_a_bad_one": lambda: _at(
            _exclude_rules(9_999, '[[configs.exclude]]\na = 7\nb = "7"\nreason = "typed wrong"\n'),
            'b = "7"', "is not a value of matrix.b"),
        "exclude_rules_ten_thousand_then_a_duplicate_name": lambda: _at(
            _exclude_rules(9_900, '', b_values=99) + '\n[[configs]]\nname = "c-0-0"\nargs = { "tp-size" = 2 }\n',
            'name = "c-0-0"', "duplicate configuration name"),
        # ---------------------------------------------------------------------------- crash signatures
        "signature_lookahead": lambda: _at(BASE + '\n[engine.crash_signatures]\nmine = \'(?=boom)boom\'\n',
                                           "mine =", "RE2"),
        "signature_backreference": lambda: _at(BASE + '\n[engine.crash_signatures]\nmine = \'(a+)\\1\'\n',
                                               "mine =", "RE2"),
        "signature_too_large_for_re2": lambda: _at(BASE + '\n[engine.crash_signatures]\nmine = \'((a{100}){100}){100}\'\n',
                                                   "mine =", "RE2"),
        "signature_five_thousand_characters": lambda: _at(BASE + "\n[engine.crash_signatures]\nmine = '"
                                                          + "a" * 5000 + "'\n", "mine =", "MAX_PATTERN_CHARS"),
        "two_hundred_signatures": lambda: _at(BASE + "\n[engine.crash_signatures]\n"
                                              + "".join(f"s{i} = 'x{i}'\n" for i in range(200)),
                                              "[engine.crash_signatures]", "MAX_SIGNATURES"),
        # ---------------------------------------------------------------------------- secrets
        "hf_token_literal_in_server_env": lambda: env("server.env", 'HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"'),
        "api_key_literal_in_config_env": lambda: env("configs.env", 'OPENAI_API_KEY = "Zx9Qw8Er7Ty6Ui5Op4As3Df2"'),
        "password_literal_in_server_env": lambda: env("server.env", 'DB_PASSWORD = "c0rrect-H0rse-Battery-9"'),
        "known_token_under_a_plain_name": lambda: env("server.env", 'EXTRA = "ghp_abcdefghijklmnopqrstuvwxyz0123"'),
        "github_token_literal_in_config_env": lambda: env("configs.env", 'GH_TOKEN = "github_pat_11AAAAAAA0123456789"'),
        # ---------------------------------------------------------------------------- names
        "config_name_trailing_newline": lambda: _at(HEAD + '\n[[configs]]\nname = "c0\\n"\n' + WORKLOAD,
                                                    'name = "c0', "not a usable name"),
        "workload_name_trailing_newline": lambda: workload('name = "w\\n"\nkind = "code"\n', 'name = "w', "not a usable name"),
        "sweep_name_trailing_newline": lambda: _at(BASE.replace('name = "hostile"', 'name = "hostile\\n"'),
                                                   'name = "hostile', "not a usable name"),
        "config_name_three_hundred_characters": lambda: _at(HEAD + f'\n[[configs]]\nname = "{"c" * 300}"\n'
                                                            + WORKLOAD, 'name = "ccc', "not a usable name"),
        "config_name_with_nul": lambda: _at(HEAD + '\n[[configs]]\nname = "c\\u0000d"\n' + WORKLOAD,
                                            'name = "c', "not a usable name"),
        # ---------------------------------------------------------------------------- prompts files
        "prompts_file_malformed_line": lambda: prompts_file("malformed.jsonl"),
        "prompts_file_without_prompts": lambda: prompts_file("empty.jsonl"),
        "prompts_file_nested_json": lambda: prompts_file("deep.jsonl"),
        "prompts_file_is_a_directory": lambda: prompts_file("a_directory.jsonl"),
        "prompts_file_is_a_fifo": lambda: prompts_file("fifo.jsonl"),
        "prompts_file_category_matches_nothing": lambda: prompts_file("ok.jsonl", 'categories = ["poetry"]\n'),
    }


def write_corpus(folder: Path) -> list[tuple[Path, int, str]]:
    """Write every hostile file into ``folder``; (path, line, substring) for each."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, make in _cases(folder).items():
        text, line, substring = make()
        path = folder / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        out.append((path, line, substring))
    return out



def case_names(folder: Path) -> list[str]:
    return list(_cases(folder))
