"""Context budgeting: never a 400 from our own sizing; clamps are recorded."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbench_tui.core.budget import BudgetError, fits, plan_budget


def test_max_fills_the_context_with_margin():
    budget = plan_budget("max", 32768, 256, margin=32)
    assert budget.prompt_tokens == 32768 - 256 - 32
    assert budget.max_new_tokens == 256 and not budget.clamped
    assert fits(budget.prompt_tokens, budget.max_new_tokens, 32768, margin=32)


def test_fitting_request_is_kept():
    budget = plan_budget(8192, 32768, 256)
    assert (budget.prompt_tokens, budget.max_new_tokens, budget.clamped) == (8192, 256, False)


def test_oversized_request_is_clamped_and_says_so():
    budget = plan_budget(40000, 32768, 256, margin=32)
    assert budget.clamped and budget.prompt_tokens == 32480 and budget.requested == 40000
    assert "40000" in budget.note and "32768" in budget.note


def test_output_longer_than_context_is_shortened():
    budget = plan_budget(100, 512, 1024, margin=32)
    assert budget.clamped and budget.max_new_tokens + budget.prompt_tokens + 32 <= 512
    with pytest.raises(BudgetError):
        plan_budget(100, 40, 16, margin=32)
    with pytest.raises(BudgetError):
        plan_budget("huge", 4096, 16)


@given(st.one_of(st.just("max"), st.integers(1, 300_000)), st.integers(200, 300_000), st.integers(1, 8192))
def test_never_exceeds_the_context(requested, context, max_new):
    try:
        budget = plan_budget(requested, context, max_new)
    except BudgetError:
        return
    assert budget.prompt_tokens + budget.max_new_tokens + 32 <= context
    assert budget.prompt_tokens >= 1 and budget.max_new_tokens >= 1
    if isinstance(requested, int) and not budget.clamped:
        assert budget.prompt_tokens == requested
