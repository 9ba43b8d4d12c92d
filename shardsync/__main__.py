"""`python -m shardsync`: the same entry point as the `shardsync` console script."""

from shardsync.cli import main

raise SystemExit(main())
