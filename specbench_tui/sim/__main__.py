"""``python -m specbench_tui.sim --model-path M ...``: launched exactly like ``python -m sglang.launch_server``.

The import sits under the ``__main__`` guard on purpose: scheduler children are started with the
multiprocessing *spawn* method (like SGLang), which re-imports this module as ``__mp_main__``; the guard
keeps that re-import free of side effects and cheap.
"""

if __name__ == "__main__":
    import sys

    from specbench_tui.sim.server import main

    sys.exit(main())
