"""Command line: ``python -m convlab demo``."""
from convlab.cli.main import main

raise SystemExit(main())
