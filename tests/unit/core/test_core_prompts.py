"""Prompt builders are deterministic; the agentic helpers evaluate and validate safely."""

import json

import pytest

from specbench_tui.core.prompts import (
    CalcError,
    arithmetic_prompts,
    calculator_reply,
    code_prompts,
    csv_feedback,
    extract_expression,
    haiku_prompts,
    json_extraction_prompts,
    load_prompts_file,
    long_context_text,
    make_csv,
    rows_named,
    safe_eval,
    transcript,
    validate_csv,
)
from specbench_tui.core.workload_kinds import CODE_TASKS


def test_builders_are_deterministic_and_named():
    assert arithmetic_prompts(3) == arithmetic_prompts(3)
    assert [p.item for p in arithmetic_prompts(3)] == ["arith-1", "arith-2", "arith-3"]
    assert len({p.text for p in json_extraction_prompts(5)}) == 5
    assert [p.item for p in code_prompts(CODE_TASKS)] == list(CODE_TASKS)
    assert haiku_prompts(2)[1].item == "haiku-2"
    assert long_context_text(5000) == long_context_text(5000)
    assert 5000 <= len(long_context_text(5000)) < 5400


def test_calculator_loop_helpers():
    assert extract_expression("I will compute.\nCALC: (1250 * 0.965**6)\nthen") == "(1250 * 0.965**6)"
    assert extract_expression("so 12 * (3 + 4) is what we need") == "12 * (3 + 4)"
    assert extract_expression("no numbers here") is None
    assert safe_eval("2 ** 10 + 1,000") == 2024
    assert calculator_reply("CALC: 7 / 2") == "RESULT: 3.5"
    assert "error" in calculator_reply("CALC: 1 / 0")
    assert "no expression" in calculator_reply("hmm")
    for hostile in ("__import__('os').system('true')", "9 ** 9 ** 9", "[1] * 10", "a + 1"):
        with pytest.raises(CalcError):
            safe_eval(hostile)


def test_csv_validator_pipeline():
    csv = make_csv(seed=300)
    truth = validate_csv(csv)
    assert truth, "the generated table must contain invalid rows"
    assert validate_csv(csv.splitlines()[0]) == {}
    named = rows_named("INVALID: " + ", ".join(map(str, truth)))
    assert named == set(truth)
    feedback = csv_feedback(0, f"INVALID: {min(truth)}", csv)
    assert "missed" in feedback and "corrected" in feedback


def test_transcript_grows():
    text = transcript([("q1", "a1")], "q2")
    assert text.startswith("User: q1\nAssistant: a1") and text.endswith("User: q2\nAssistant:")


def test_prompts_file_spec_bench_and_plain(tmp_path):
    path = tmp_path / "question.jsonl"
    rows = [{"question_id": 81, "category": "writing", "turns": ["Write a blog post.", "Rewrite it as a poem."]},
            {"question_id": 82, "category": "math_reasoning", "turns": ["What is 2+2?"]},
            {"id": "custom", "prompt": "Say hi", "category": "chat"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    items = load_prompts_file(path)
    assert [i.item for i in items] == ["q81", "q82", "custom"]
    assert items[0].turns == ("Rewrite it as a poem.",)
    assert [i.item for i in load_prompts_file(path, categories=["math_reasoning"])] == ["q82"]
    assert len(load_prompts_file(path, limit=1)) == 1
