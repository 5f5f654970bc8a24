"""symphys' version, read by setup.cfg and stamped into caches and exports."""

__version__ = "0.1.0"
