"""Under load: figures per load point, the matched baseline per point, goodput, the crossover B*, the schedule,
and the adaptive search that decides which load points to measure next.

Pure, part of the single analysis (:func:`specbench_tui.core.analysis.analyse` calls
:func:`~specbench_tui.core.crossover.analyse.analyse_load` and keeps the result in ``RunAnalysis.load``); every
view reads it from there. Where things live:

- :mod:`.results` holds what the analysis produces (:class:`~.results.LoadAnalysis`: point rows, crossovers,
  the schedule) and reads the load workloads from the run's plan;
- :mod:`.analyse` assembles it: rows per point, the matched baseline's speedup per point, then crossovers and
  the schedule;
- :mod:`.points` computes one configuration's figures at one load point (throughput, latency, goodput, SLO);
- :mod:`.bracket` finds where a speedup falls below 1 on a load axis; :mod:`.schedule` picks the best
  configuration per load point;
- :mod:`.search` decides which load points to measure next (:func:`~.search.search_needs`);
- :mod:`.stats` is the per-repeat summary (median, MAD, range) and percentiles.

Rules, and why:

- a load point's figures are taken per repeat (one repeat = the point's requests sent once, closed- or
  open-loop) and summarised over repeats: with ``repeats >= 3`` by the **median and the MAD** (median absolute
  deviation), otherwise by the median and the range. A point whose relative spread (MAD ÷ median) exceeds the
  workload's ``noise_threshold`` (default 0.1, vLLM's tuner's rule) is **noisy**: it is shown, flagged, and never
  decides a crossover or a schedule entry;
- total output tok/s = completion tokens of the repeat's ok requests ÷ the repeat's window (its first request
  starting to leave the client to its last answer read); per-user tok/s = the median request's decode tok/s; request throughput = ok
  requests ÷ window; TTFT, ITL (each request's p99 inter-token latency) and e2e as p50/p90/p99 over the
  point's ok requests; acceptance per request (verify-weighted) beside the server's own figure;
- **goodput** under the workload's SLO: requests that met every limit (TTFT ≤ ttft_ms, the request's p99 ITL
  ≤ itl_ms, e2e ≤ e2e_ms) per second of the window, and their output tok/s; the point *meets* the SLO when the
  SLO's percentile (p99 by default) of each figure over the point's requests is within its limit;
- the **speedup** at a load point pairs requests with the matched baseline *at the same workload and load
  point* (same request index, same repeat), exactly as at batch 1
  (:func:`specbench_tui.core.analysis.paired_speedup`); its noise is the spread of the per-repeat ratios;
- the **crossover** of a speculative configuration on a load axis is where its speedup falls below 1: the
  interval (lo, hi] between the highest non-noisy point still ≥ 1 below the first one under 1. ``never_pays``
  when the lowest point is already under 1, ``always_pays`` when the highest is still ≥ 1;
- the **schedule**: per load point, the configuration with the highest per-user tok/s among those measured there
  (noisy points, crashed configurations and lossy ones excluded), its margin over the runner-up, and whether
  that margin exceeds the repeat spread (1.4826 × the two MADs with ≥ 3 repeats, else the two ranges);
- the **adaptive search** (:func:`search_needs`): measure both ends of the axis; stop a configuration that is
  under 1 at the lowest point (every higher load is dominated) or still ≥ 1 at the highest; otherwise probe
  inside the bracket: with two points at the log-interpolated root, with three or more at both grid
  neighbours of the root of a fitted ``S(B) = (p + qB) / (1 + rB)`` (the speedup of two servers whose step times
  grow linearly in the batch is exactly this ratio), until the bracket's ends are neighbours on the grid. The
  matched baseline measures the union of its configurations' probes.
"""
