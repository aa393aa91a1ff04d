"""Command line: ``python -m convlab demo``."""
from convlab.cli import main

raise SystemExit(main())
