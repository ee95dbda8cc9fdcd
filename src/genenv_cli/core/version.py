"""The version genenv reports (`genenv --version`, every manifest and result file)."""

__version__ = "0.1.0"
