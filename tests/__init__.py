"""The convlab test suite (a package, so its modules import each other as ``tests.*``)."""
