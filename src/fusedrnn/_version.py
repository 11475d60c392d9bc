"""The installed distribution's version (``0.0.0+unknown`` when running from a source tree)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fusedrnn")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
