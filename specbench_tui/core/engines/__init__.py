"""One module per server engine (``sglang``, ``llamacpp``, ``vllm``), each an :class:`~.base.EngineProfile`
registered by name in :mod:`.registry`; :mod:`.simulator` holds what a run on the SGLang simulator (a launcher of
the SGLang engine) means to the rest of the program. ``docs/adding-an-engine.md`` walks through adding one."""
