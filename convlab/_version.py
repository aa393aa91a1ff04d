"""The version, for the package and the calibration files' keys."""
VERSION = "0.1.0"
