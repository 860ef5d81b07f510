"""`python -m specbench_tui` runs the same CLI as the `specbench` command."""

from specbench_tui.cli import main

raise SystemExit(main())
