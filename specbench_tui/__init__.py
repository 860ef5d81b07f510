"""specbench-tui: sweep speculative-decoding configurations of LLM servers and measure them truthfully."""

__version__ = "0.1.0"
