"""Whether a measured point ran with CUDA graphs: the share of its decode lines that said ``cuda graph: True``
and the batch sizes that ran eager (a batch above the captured graphs runs eager with no error)."""

from __future__ import annotations



def eager_text(row: object) -> str:
    """``eager at batch 72, 80 (40% of decode lines without a CUDA graph)`` for a point or cell that ran some
    decode steps eager, else ""."""
    share = getattr(row, "graph_share", None)
    if share is None or share >= 1.0:
        return ""
    batches = getattr(row, "eager_batches", ()) or ()
    at = f" at batch {', '.join(str(b) for b in batches)}" if batches else ""
    return f"eager{at} ({1.0 - share:.0%} of decode lines without a CUDA graph)"
