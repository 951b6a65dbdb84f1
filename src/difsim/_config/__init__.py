"""Experiment configs: TOML parsing, the schema and its checks, and the objects each section
builds.
"""

from difsim._config._load import (
    ConfigError as ConfigError,
    Experiment as Experiment,
    load_config as load_config,
    parse_override as parse_override,
)
