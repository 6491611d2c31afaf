"""``python -m ppsvm``: the same command line as the ``ppsvm`` console script."""

from ppsvm.cli import main

raise SystemExit(main())
